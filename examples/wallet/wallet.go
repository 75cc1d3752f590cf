package wallet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
)

// Config configures a Service. nil means every default.
type Config struct {
	// Commands configures the executor (retries, backoff, metrics). Default:
	// commands' defaults.
	Commands *commands.Config
}

// Service runs the wallet commands.
type Service struct {
	store *eventstore.Store
	exec  *commands.Executor
}

// New returns a Service over a migrated store.
func New(store *eventstore.Store, cfg *Config) (*Service, error) {
	var cc *commands.Config
	if cfg != nil {
		cc = cfg.Commands
	}
	ex, err := commands.New(store, cc)
	if err != nil {
		return nil, err
	}
	return &Service{store: store, exec: ex}, nil
}

// Executor returns the command executor (its Stats and Collectors).
func (s *Service) Executor() *commands.Executor { return s.exec }

// Store returns the event store.
func (s *Service) Store() *eventstore.Store { return s.store }

// Options are per-command options; nil means none.
type Options struct {
	// CommandID makes the command idempotent (an HTTP Idempotency-Key).
	CommandID uuid.UUID
	// IfMatch, when set, rejects the command with ErrStale if any event of the
	// wallet (the source wallet of a transfer) exists that this cursor has not
	// seen.
	IfMatch *cursor.Cursor
}

// Result is the outcome of a wallet command.
type Result struct {
	WalletID string
	// Balance after the command, as decided.
	Balance int64
	// Amount deposited, withdrawn or transferred, as recorded (for a replayed
	// command id: the first execution's amount, not the replay's).
	Amount int64
	// ToWalletID and ToBalance are set for transfers.
	ToWalletID string
	ToBalance  int64
	Outcome    commands.Outcome
}

// View is a wallet as read by a decision read.
type View struct {
	WalletID string
	Balance  int64
	// Cursor of the read: send it back as If-Match.
	Cursor cursor.Cursor
}

type cmdData struct {
	WalletID string `json:"wallet_id,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	Amount   int64  `json:"amount,omitempty"`
}

// Wallet reads a wallet's balance and decision cursor.
func (s *Service) Wallet(ctx context.Context, id string) (View, error) {
	if !ValidID(id) {
		return View{}, ErrInvalidWalletID
	}
	m := Model(id)
	cond, err := s.store.Project(ctx, m)
	if err != nil {
		return View{}, err
	}
	if m.State.Err != nil {
		return View{}, m.State.Err
	}
	if !m.State.Open {
		return View{}, ErrWalletNotFound
	}
	return View{WalletID: id, Balance: m.State.Balance, Cursor: *cond.After}, nil
}

// Open opens a wallet; its id must not be in use.
func (s *Service) Open(ctx context.Context, id string, opt *Options) (Result, error) {
	if !ValidID(id) {
		return Result{}, ErrInvalidWalletID
	}
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]eventstore.Event, appendif.Condition, error) {
		m := Model(id)
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		if m.State.Open {
			return nil, cond, ErrWalletExists
		}
		ev, err := newEvent(WalletOpened, EventData{WalletID: id})
		return []eventstore.Event{ev}, cond, err
	})
	return s.run(ctx, CmdOpen, cmdData{WalletID: id}, opt, h)
}

// Deposit adds a positive amount to a wallet.
func (s *Service) Deposit(ctx context.Context, id string, amount int64, opt *Options) (Result, error) {
	return s.single(ctx, CmdDeposit, MoneyDeposited, id, amount, opt)
}

// Withdraw takes a positive amount from a wallet, never below zero.
func (s *Service) Withdraw(ctx context.Context, id string, amount int64, opt *Options) (Result, error) {
	return s.single(ctx, CmdWithdraw, MoneyWithdrawn, id, amount, opt)
}

func (s *Service) single(ctx context.Context, cmdType, evType, id string, amount int64, opt *Options) (Result, error) {
	if !ValidID(id) {
		return Result{}, ErrInvalidWalletID
	}
	if amount <= 0 {
		return Result{}, ErrInvalidAmount
	}
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]eventstore.Event, appendif.Condition, error) {
		m := Model(id)
		projectors := []eventstore.Projector{m}
		var chk *unseen
		if opt != nil && opt.IfMatch != nil {
			chk = &unseen{q: Query(id), after: *opt.IfMatch}
			projectors = append(projectors, chk)
		}
		cond, err := dc.Project(ctx, projectors...)
		if err != nil {
			return nil, cond, err
		}
		st := m.State
		switch {
		case st.Err != nil:
			return nil, cond, st.Err
		case !st.Open:
			return nil, cond, ErrWalletNotFound
		case chk != nil && chk.stale:
			return nil, cond, ErrStale
		}
		bal := st.Balance
		if evType == MoneyDeposited {
			if bal > math.MaxInt64-amount {
				return nil, cond, fmt.Errorf("%w: the balance would overflow", ErrInvalidAmount)
			}
			bal += amount
		} else {
			if bal < amount {
				return nil, cond, ErrInsufficientFunds
			}
			bal -= amount
		}
		ev, err := newEvent(evType, EventData{WalletID: id, Amount: amount, Balance: bal})
		return []eventstore.Event{ev}, cond, err
	})
	return s.run(ctx, cmdType, cmdData{WalletID: id, Amount: amount}, opt, h)
}

// Transfer moves a positive amount from one wallet to another in one decision
// over both wallets: it appends TransferSent (tagged with the source) and
// TransferReceived (tagged with the target) under one condition covering both.
// IfMatch applies to the source wallet.
func (s *Service) Transfer(ctx context.Context, from, to string, amount int64, opt *Options) (Result, error) {
	if !ValidID(from) || !ValidID(to) {
		return Result{}, ErrInvalidWalletID
	}
	if amount <= 0 {
		return Result{}, ErrInvalidAmount
	}
	if from == to {
		return Result{}, ErrSameWallet
	}
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]eventstore.Event, appendif.Condition, error) {
		src, dst := Model(from), Model(to)
		projectors := []eventstore.Projector{src, dst}
		var chk *unseen
		if opt != nil && opt.IfMatch != nil {
			chk = &unseen{q: Query(from), after: *opt.IfMatch}
			projectors = append(projectors, chk)
		}
		// One read of both wallets; the condition covers the union of their tags.
		cond, err := dc.Project(ctx, projectors...)
		if err != nil {
			return nil, cond, err
		}
		switch {
		case src.State.Err != nil:
			return nil, cond, src.State.Err
		case dst.State.Err != nil:
			return nil, cond, dst.State.Err
		case !src.State.Open:
			return nil, cond, fmt.Errorf("%w: %s", ErrWalletNotFound, from)
		case !dst.State.Open:
			return nil, cond, fmt.Errorf("%w: %s", ErrWalletNotFound, to)
		case chk != nil && chk.stale:
			return nil, cond, ErrStale
		case src.State.Balance < amount:
			return nil, cond, ErrInsufficientFunds
		case dst.State.Balance > math.MaxInt64-amount:
			return nil, cond, fmt.Errorf("%w: the target balance would overflow", ErrInvalidAmount)
		}
		tid := dc.Command.ID.String()
		sent, err := newEvent(TransferSent, EventData{WalletID: from, Amount: amount,
			Balance: src.State.Balance - amount, TransferID: tid, From: from, To: to})
		if err != nil {
			return nil, cond, err
		}
		recv, err := newEvent(TransferReceived, EventData{WalletID: to, Amount: amount,
			Balance: dst.State.Balance + amount, TransferID: tid, From: from, To: to})
		return []eventstore.Event{sent, recv}, cond, err
	})
	return s.run(ctx, CmdTransfer, cmdData{From: from, To: to, Amount: amount}, opt, h)
}

func (s *Service) run(ctx context.Context, typ string, data cmdData, opt *Options, h commands.Handler) (Result, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Result{}, err
	}
	c := commands.Command{Type: typ, Data: raw, Handler: h}
	if opt != nil {
		c.ID = opt.CommandID
	}
	out, err := s.exec.Execute(ctx, c)
	if err != nil {
		// Business rejections come back as the wallet's own errors.
		var rej *commands.RejectedError
		if errors.As(err, &rej) {
			return Result{}, rej.Err
		}
		return Result{}, err
	}
	res := Result{Outcome: out}
	for i, ev := range out.Events {
		var d EventData
		if err := json.Unmarshal(ev.Data, &d); err != nil {
			return res, err
		}
		if i == 0 {
			res.WalletID, res.Balance, res.Amount = d.WalletID, d.Balance, d.Amount
		} else {
			res.ToWalletID, res.ToBalance = d.WalletID, d.Balance
		}
	}
	return res, nil
}
