package wallet

import (
	"encoding/json"
	"regexp"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// Event types.
const (
	WalletOpened     = "WalletOpened"
	MoneyDeposited   = "MoneyDeposited"
	MoneyWithdrawn   = "MoneyWithdrawn"
	TransferSent     = "TransferSent"
	TransferReceived = "TransferReceived"
)

// EventTypes are all the wallet's event types.
var EventTypes = []string{WalletOpened, MoneyDeposited, MoneyWithdrawn, TransferSent, TransferReceived}

// TagKey is the key of the tag every wallet event carries: wallet=<id>.
const TagKey = "wallet"

// Command types (recorded in the commands table).
const (
	CmdOpen     = "OpenWallet"
	CmdDeposit  = "Deposit"
	CmdWithdraw = "Withdraw"
	CmdTransfer = "Transfer"
)

// EventData is the payload of every wallet event. Balance is the wallet's
// balance after the event, as decided.
type EventData struct {
	WalletID   string `json:"wallet_id"`
	Amount     int64  `json:"amount,omitempty"`
	Balance    int64  `json:"balance"`
	TransferID string `json:"transfer_id,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
}

var walletIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidID reports whether id is a valid wallet id: 1..64 of [A-Za-z0-9_.-].
func ValidID(id string) bool { return walletIDPattern.MatchString(id) }

// Query selects every event of one wallet.
func Query(id string) query.Query {
	return query.Tagged(nil, TagKey+"="+id)
}

// Delta is the change an event makes to its wallet's balance.
func Delta(ev pgdcb.StoredEvent) (int64, error) {
	switch ev.Type {
	case MoneyDeposited, TransferReceived, MoneyWithdrawn, TransferSent:
		var d EventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return 0, err
		}
		if ev.Type == MoneyWithdrawn || ev.Type == TransferSent {
			return -d.Amount, nil
		}
		return d.Amount, nil
	}
	return 0, nil
}

func newEvent(typ string, d EventData) (pgdcb.Event, error) {
	return pgdcb.NewEvent(typ, d, TagKey+"="+d.WalletID)
}
