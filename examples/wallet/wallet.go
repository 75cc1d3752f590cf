package wallet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
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
	store pgdcb.Store
	pg    *eventstore.Store // store, when it is PostgreSQL's; else nil
	exec  *commands.Executor
	// claims bounds the connections held by idempotency-key locks (see claim)
	// to half the pool, so that lock holders waiting for a connection to run
	// their command can never take the whole pool.
	claims chan struct{}
	// local holds the idempotency keys in flight on a store other than
	// PostgreSQL's (one process: memstore in tests).
	localMu sync.Mutex
	local   map[uuid.UUID]bool
	// rejected holds the rejections recorded under a command id on a store
	// other than PostgreSQL's (whose commands table keeps them).
	rejected map[uuid.UUID]commandMetadata
}

// New returns a Service over a migrated PostgreSQL store, or over any other
// pgdcb.Store (memstore, for domain tests). On another store the
// Idempotency-Key locks and the recorded rejections are held in this process
// only, and a replayed command id with a Fingerprint fails (the fingerprint is
// read back from the commands table, which only PostgreSQL has:
// errors.ErrUnsupported).
func New(store pgdcb.Store, cfg *Config) (*Service, error) {
	var cc *commands.Config
	if cfg != nil {
		cc = cfg.Commands
	}
	ex, err := commands.New(store, cc)
	if err != nil {
		return nil, err
	}
	s := &Service{store: store, exec: ex, local: map[uuid.UUID]bool{}, rejected: map[uuid.UUID]commandMetadata{}}
	s.pg, _ = store.(*eventstore.Store)
	if s.pg != nil {
		s.claims = make(chan struct{}, max(1, s.pg.Pool().Config().MaxConns/2))
	}
	return s, nil
}

// Executor returns the command executor (its Stats and Collectors).
func (s *Service) Executor() *commands.Executor { return s.exec }

// Store returns the PostgreSQL event store; nil when the service runs on
// another store (see Log).
func (s *Service) Store() *eventstore.Store { return s.pg }

// Log returns the store the service runs on, whichever it is.
func (s *Service) Log() pgdcb.Store { return s.store }

// Options are per-command options; nil means none.
type Options struct {
	// CommandID makes the command idempotent (an HTTP Idempotency-Key, see
	// KeyCommandID): a second run with the same id appends nothing and returns
	// the first outcome: the first Result (Result.Outcome.Duplicate), or the
	// first business rejection as a *ReplayedRejectionError (a rejection is
	// recorded under the id: a command without events in the commands table).
	CommandID uuid.UUID
	// Fingerprint, with CommandID, identifies the request the id was sent with
	// (the HTTP API uses a hash of method, path and body). It is recorded in the
	// command's metadata, so it survives restarts and is shared by every
	// instance. A later run with the same id and another fingerprint fails with
	// ErrKeyReused; a run while another with the same id is still executing
	// fails with ErrInFlight rather than waiting for it (a session advisory
	// lock, held for the run on a connection of the store's pool). Empty: no
	// such checks (the first outcome is returned whatever the request).
	Fingerprint string
	// IfMatch, when set, is a precondition on the wallet (the source wallet of
	// a transfer): the command fails with ErrStale unless it holds.
	IfMatch *Precondition
}

// Precondition is an If-Match precondition on a wallet. It holds when the
// wallet's version (View.Version: the point of its last event) is one of
// Versions: RFC 9110's strong comparison, "any listed entity-tag matches".
// With no versions it never holds (an If-Match whose tags are all weak or not
// of this API). It is checked in the command's own decision read, so nothing
// can slip between the check and the decision.
type Precondition struct {
	Versions []cursor.Cursor
}

// IfMatch returns the precondition "the wallet's version is one of vs".
func IfMatch(vs ...cursor.Cursor) *Precondition { return &Precondition{Versions: vs} }

// holds reports whether the wallet's version v is one of p's (a nil p always
// holds). Only the point counts: a snapshot a cursor carries is ignored.
func (p *Precondition) holds(v cursor.Cursor) bool {
	if p == nil {
		return true
	}
	for _, c := range p.Versions {
		if c.TransactionID == v.TransactionID && c.Position == v.Position {
			return true
		}
	}
	return false
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
	// Version is the wallet's own version: a cursor (without snapshot) at its
	// last event. It changes when, and only when, the wallet does (another
	// wallet's events leave it alone): the HTTP API's strong ETag; send it
	// back in a Precondition (If-Match).
	Version cursor.Cursor
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
	if _, err := s.store.Project(ctx, m); err != nil {
		return View{}, err
	}
	if err := m.State.CorruptError(); err != nil {
		return View{}, err
	}
	if !m.State.Open {
		return View{}, ErrWalletNotFound
	}
	return View{WalletID: id, Balance: m.State.Balance, Version: m.State.Version()}, nil
}

// Open opens a wallet; its id must not be in use.
func (s *Service) Open(ctx context.Context, id string, opt *Options) (Result, error) {
	if !ValidID(id) {
		return Result{}, ErrInvalidWalletID
	}
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		m := Model(id)
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		if m.State.Open {
			return nil, cond, ErrWalletExists
		}
		ev, err := newEvent(WalletOpened, EventData{WalletID: id})
		return []pgdcb.Event{ev}, cond, err
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
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		m := Model(id)
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		st := m.State
		switch {
		case st.Corrupt != "":
			return nil, cond, st.CorruptError()
		case !st.Open:
			return nil, cond, ErrWalletNotFound
		case !opt.precondition().holds(st.Version()):
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
		return []pgdcb.Event{ev}, cond, err
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
	h := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		src, dst := Model(from), Model(to)
		// One read of both wallets; the condition covers the union of their tags.
		cond, err := dc.Project(ctx, src, dst)
		if err != nil {
			return nil, cond, err
		}
		switch {
		case src.State.Corrupt != "":
			return nil, cond, src.State.CorruptError()
		case dst.State.Corrupt != "":
			return nil, cond, dst.State.CorruptError()
		case !src.State.Open:
			return nil, cond, fmt.Errorf("%w: %s", ErrWalletNotFound, from)
		case !dst.State.Open:
			return nil, cond, fmt.Errorf("%w: %s", ErrWalletNotFound, to)
		case !opt.precondition().holds(src.State.Version()):
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
		return []pgdcb.Event{sent, recv}, cond, err
	})
	return s.run(ctx, CmdTransfer, cmdData{From: from, To: to, Amount: amount}, opt, h)
}

// precondition is opt's IfMatch (nil: none).
func (opt *Options) precondition() *Precondition {
	if opt == nil {
		return nil
	}
	return opt.IfMatch
}

// commandMetadata is recorded with a command run with a Fingerprint, and
// with a rejection recorded under a command id.
type commandMetadata struct {
	Fingerprint string     `json:"idempotency_fingerprint,omitempty"`
	Rejected    *rejection `json:"rejected,omitempty"`
}

// rejection is a business rejection as recorded under its command id.
type rejection struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

func (s *Service) run(ctx context.Context, typ string, data cmdData, opt *Options, h commands.Handler) (Result, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return Result{}, err
	}
	c := commands.Command{Type: typ, Data: raw, Handler: h}
	var fp string
	if opt != nil {
		c.ID = opt.CommandID
		if c.ID != uuid.Nil {
			fp = opt.Fingerprint
		}
	}
	if c.ID == uuid.Nil {
		out, err := s.exec.Execute(ctx, c)
		return result(out, err)
	}
	for {
		res, err := s.runID(ctx, c, fp)
		if !errors.Is(err, errKeyExpired) {
			return res, err
		}
		// The id's record outlived IdempotencyKeyLifetime: the key starts
		// a new command, under the next id of its chain.
		c.ID = nextKeyID(c.ID)
	}
}

// IdempotencyKeyLifetime is how long a command id run with a Fingerprint
// (the HTTP API's Idempotency-Key) is kept: a retry within it replays the
// first outcome; once the first run's record is older (on PostgreSQL, by the
// commands table's occurred_at), the same key is a new request and runs as
// one, under another command id (nextKeyID). The record itself stays.
const IdempotencyKeyLifetime = 24 * time.Hour

// errKeyExpired: the command id's record is older than
// IdempotencyKeyLifetime (replay); run moves on to nextKeyID.
var errKeyExpired = errors.New("wallet: idempotency key expired")

// nextKeyID is the command id a key takes once its record under id expired:
// derived from id alone, so that every instance follows the same chain.
func nextKeyID(id uuid.UUID) uuid.UUID {
	return uuid.NewSHA1(idempotencyKeySpace, append([]byte("expired\x00"), id[:]...))
}

// runID runs c under its command id (not uuid.Nil) and its fingerprint fp.
func (s *Service) runID(ctx context.Context, c commands.Command, fp string) (Result, error) {
	var err error
	typ := c.Type
	if fp != "" {
		if c.Metadata, err = json.Marshal(commandMetadata{Fingerprint: fp}); err != nil {
			return Result{}, err
		}
		release, err := s.claim(ctx, c.ID)
		if errors.Is(err, ErrInFlight) {
			// Another run holds the id, or has just finished: if it is
			// recorded, this is a replay.
			rec, events, ferr := s.exec.EventsOfCommand(ctx, c.ID)
			if errors.Is(ferr, commands.ErrCommandNotFound) {
				return Result{}, err
			}
			if ferr != nil {
				return Result{}, fmt.Errorf("wallet: looking up command %s: %w", c.ID, ferr)
			}
			return replay(rec, commands.Outcome{CommandID: c.ID, TransactionID: rec.TransactionID, Events: events, Duplicate: true}, fp)
		}
		if err != nil {
			return Result{}, err
		}
		defer release()
	}
	if r, ok := s.localRejection(c.ID); ok {
		return replay(commands.Record{CommandID: c.ID, Type: typ, Metadata: r}, commands.Outcome{CommandID: c.ID, Duplicate: true}, fp)
	}
	out, err := s.exec.Execute(ctx, c)
	if err != nil {
		var rej *commands.RejectedError
		if code := RejectionCode(err); code != "" && errors.As(err, &rej) {
			// The first outcome is this rejection: record it under the id so
			// that a retry replays it rather than deciding again.
			return s.recordRejection(ctx, c, rej.Err, rejection{Code: code, Detail: rej.Err.Error()}, fp)
		}
		return result(out, err)
	}
	if out.Duplicate {
		return s.replayDuplicate(ctx, c, out, fp)
	}
	return result(out, nil)
}

// replayDuplicate answers a command id found executed: with its first
// outcome, or its recorded rejection, after checking the fingerprint.
func (s *Service) replayDuplicate(ctx context.Context, c commands.Command, out commands.Outcome, fp string) (Result, error) {
	if fp == "" && len(out.Events) > 0 {
		return result(out, nil) // a success: nothing else to look up
	}
	rec, err := s.exec.Command(ctx, c.ID)
	if err != nil {
		return Result{}, fmt.Errorf("wallet: looking up command %s: %w", c.ID, err)
	}
	return replay(rec, out, fp)
}

// recordRejection records the rejection r (rejErr, a handler's error) as the
// outcome of command c: a command without events whose metadata holds r. It
// returns rejErr; or, if c's id was recorded first by another run (one
// without a Fingerprint takes no lock), that first outcome. A failure to
// record is not the client's: the rejection is still the answer (a retry
// then decides again).
func (s *Service) recordRejection(ctx context.Context, c commands.Command, rejErr error, r rejection, fp string) (Result, error) {
	meta := commandMetadata{Fingerprint: fp, Rejected: &r}
	if s.pg == nil {
		s.localMu.Lock()
		if _, ok := s.rejected[c.ID]; !ok {
			s.rejected[c.ID] = meta
		}
		s.localMu.Unlock()
		return Result{}, rejErr
	}
	raw, err := json.Marshal(meta)
	if err != nil {
		return Result{}, rejErr
	}
	c.Metadata = raw
	c.Handler = commands.HandlerFunc(func(context.Context, *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		return nil, appendif.Condition{}, nil
	})
	out, err := s.exec.Execute(ctx, c)
	if err == nil && out.Duplicate {
		return s.replayDuplicate(ctx, c, out, fp)
	}
	return Result{}, rejErr
}

// localRejection returns the rejection recorded under id on a store other
// than PostgreSQL's.
func (s *Service) localRejection(id uuid.UUID) (json.RawMessage, bool) {
	if s.pg != nil {
		return nil, false
	}
	s.localMu.Lock()
	m, ok := s.rejected[id]
	s.localMu.Unlock()
	if !ok {
		return nil, false
	}
	raw, err := json.Marshal(m)
	return raw, err == nil
}

// replay answers with a recorded command's outcome: ErrKeyReused if it was
// run with another fingerprint, its rejection if one is recorded, else out.
func replay(rec commands.Record, out commands.Outcome, fp string) (Result, error) {
	if fp != "" && !rec.OccurredAt.IsZero() && time.Since(rec.OccurredAt) > IdempotencyKeyLifetime {
		return Result{}, errKeyExpired
	}
	var m commandMetadata
	if len(rec.Metadata) > 0 {
		if err := json.Unmarshal(rec.Metadata, &m); err != nil {
			return Result{}, fmt.Errorf("wallet: command %s: metadata: %w", rec.CommandID, err)
		}
	}
	if fp != "" && m.Fingerprint != fp {
		return Result{}, fmt.Errorf("%w (by a %s command)", ErrKeyReused, rec.Type)
	}
	if r := m.Rejected; r != nil {
		return Result{}, &ReplayedRejectionError{Code: r.Code, Detail: r.Detail, Err: rejectionErr(r.Code)}
	}
	return result(out, nil)
}

// IdempotencyLockKey is the session advisory lock (two-int4 form, a key space
// apart from the store's own bigint keys) held while a command id runs with a
// Fingerprint in the store's schema.
func IdempotencyLockKey(schema string, id uuid.UUID) (int32, int32) {
	h := fnv.New64a()
	h.Write([]byte("pgdcb.wallet.idempotency\x00" + schema + "\x00"))
	h.Write(id[:])
	v := h.Sum64()
	return int32(v >> 32), int32(v)
}

// claim takes the command id's advisory lock without waiting, on a pooled
// connection it keeps until release; ErrInFlight if another session holds it.
// The lock is in the database, so it works across instances, and it goes with
// the session if the process dies.
func (s *Service) claim(ctx context.Context, id uuid.UUID) (release func(), err error) {
	if s.pg == nil {
		return s.claimLocal(id)
	}
	select {
	case s.claims <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	conn, err := s.pg.Pool().Acquire(ctx)
	if err != nil {
		<-s.claims
		return nil, fmt.Errorf("wallet: idempotency lock: %w", err)
	}
	k1, k2 := IdempotencyLockKey(s.pg.Schema(), id)
	// done returns the connection; closing it first drops the session's locks
	// when their state is unknown (the pool discards a closed connection).
	done := func(closeConn bool) {
		if closeConn {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = conn.Conn().Close(cctx)
			cancel()
		}
		conn.Release()
		<-s.claims
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, k1, k2).Scan(&got); err != nil {
		done(true)
		return nil, fmt.Errorf("wallet: idempotency lock: %w", err)
	}
	if !got {
		done(false)
		return nil, ErrInFlight
	}
	return func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		var unlocked bool
		err := conn.QueryRow(uctx, `SELECT pg_advisory_unlock($1, $2)`, k1, k2).Scan(&unlocked)
		done(err != nil || !unlocked)
	}, nil
}

// claimLocal is claim on a store other than PostgreSQL's: the key is held
// in this process.
func (s *Service) claimLocal(id uuid.UUID) (release func(), err error) {
	s.localMu.Lock()
	defer s.localMu.Unlock()
	if s.local[id] {
		return nil, ErrInFlight
	}
	s.local[id] = true
	return func() {
		s.localMu.Lock()
		delete(s.local, id)
		s.localMu.Unlock()
	}, nil
}

// result turns an executor's answer into the wallet's.
func result(out commands.Outcome, err error) (Result, error) {
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
