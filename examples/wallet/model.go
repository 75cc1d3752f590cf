package wallet

import (
	"errors"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

// State is a wallet's decision state. Decisions start from a stored snapshot
// of it (pgdcb.Model.WithSnapshots, docs/SNAPSHOTS.md), so it must
// survive a JSON round trip: change modelVersion whenever it or the fold
// changes.
type State struct {
	Open    bool  `json:"open"`
	Balance int64 `json:"balance"`
	// Corrupt is the error text of the first event of the wallet that could
	// not be decoded ("" if none): every decision on the wallet then fails
	// with CorruptError.
	Corrupt string `json:"corrupt,omitempty"`
	// LastTransactionID and LastPosition are the point of the wallet's last
	// event: its version (Version).
	LastTransactionID uint64 `json:"last_tx,omitempty"`
	LastPosition      int64  `json:"last_pos,omitempty"`
}

// Version is the wallet's version: a cursor (without snapshot) at its last
// event; the start of the log for a wallet without events.
func (s State) Version() cursor.Cursor {
	return cursor.Cursor{TransactionID: s.LastTransactionID, Position: s.LastPosition}
}

// CorruptError returns the error recorded in Corrupt, nil if there is none.
func (s State) CorruptError() error {
	if s.Corrupt == "" {
		return nil
	}
	return errors.New(s.Corrupt)
}

// The decision model's snapshot name and version (see State).
const (
	modelName = "wallet"
	// 2: State gained the wallet's version (LastTransactionID, LastPosition).
	modelVersion = 2
)

// Model returns the decision model of one wallet, with snapshots.
func Model(id string) *pgdcb.Model[State] {
	return pgdcb.NewModel(Query(id), State{}, func(s State, ev pgdcb.StoredEvent) State {
		s.LastTransactionID, s.LastPosition = ev.TransactionID, ev.Position
		if ev.Type == WalletOpened {
			s.Open = true
			return s
		}
		d, err := Delta(ev)
		if err != nil && s.Corrupt == "" {
			s.Corrupt = err.Error()
		}
		s.Balance += d
		return s
	}).WithSnapshots(modelName, modelVersion)
}
