package wallet

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// BalancesConfig configures the Balances read model. nil means every default.
type BalancesConfig struct {
	// BatchSize is the most events applied per transaction. Default 500.
	BatchSize int
	// PollInterval is how long the projection waits when caught up (a
	// notification wakes it sooner). Default 50ms.
	PollInterval time.Duration
	// ReadWait bounds how long Balance waits for the read model to hold the
	// wallet's events committed before the call (read-your-writes). Default 2s.
	ReadWait time.Duration
	// Version numbers the read model's table and projection, both named
	// wallet_balances_v<Version>; readers read the view wallet_balances
	// (BalancesView). A new version builds beside the live one from the
	// start of the log; projection.Switch then makes the view show it
	// (docs/LIFECYCLE.md). Default 1.
	Version int
}

// ErrReadModelBehind: the read model did not reach the wallet's last event
// within BalancesConfig.ReadWait (an open transaction of the database holds
// tailing readers, or the projection is not running). HTTP 503.
var ErrReadModelBehind = errors.New("wallet: the balances read model is behind")

// Balances is the balance read model: a table wallet_balances_v<Version>
// (wallet_id, balance) in the store's schema, maintained by a projection
// (projection.Runner) of the same name: each batch updates the balances and
// the projection's checkpoint in one transaction, so a crash never applies
// an event twice or skips one. Several runners may run: one leads, the
// others stand by. Readers read the view wallet_balances, over the table of
// the version that serves it. The projection registers its table, so that
// any reset (Projection().Reset, projection.Reset, `pgdcb projections
// reset`) empties it with the checkpoint.
type Balances struct {
	store  *eventstore.Store
	cfg    BalancesConfig
	runner *projection.Runner
	sql    struct{ setup, view, upsert, balance, checkpoint string }
}

// BalancesView is the view the balances are read through.
const BalancesView = "wallet_balances"

// NewBalances returns the read model over the store. Call Setup once.
func NewBalances(store *eventstore.Store, cfg *BalancesConfig) *Balances {
	b := &Balances{store: store}
	if cfg != nil {
		b.cfg = *cfg
	}
	if b.cfg.BatchSize <= 0 {
		b.cfg.BatchSize = 500
	}
	if b.cfg.PollInterval <= 0 {
		b.cfg.PollInterval = 50 * time.Millisecond
	}
	if b.cfg.ReadWait <= 0 {
		b.cfg.ReadWait = 2 * time.Second
	}
	if b.cfg.Version <= 0 {
		b.cfg.Version = 1
	}
	name := fmt.Sprintf("%s_v%d", BalancesView, b.cfg.Version)
	s := pgx.Identifier{store.Schema()}.Sanitize()
	table := pgx.Identifier{store.Schema(), name}.Sanitize()
	view := pgx.Identifier{store.Schema(), BalancesView}.Sanitize()
	b.sql.setup = `CREATE TABLE IF NOT EXISTS ` + table + ` (
			wallet_id  text        PRIMARY KEY,
			balance    bigint      NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now())`
	// Readers may read before the projection first ran (and created the
	// view over its table): the view is created if there is none.
	b.sql.view = `DO $do$ BEGIN IF to_regclass(` + quoteLiteral(view) + `) IS NULL THEN
			CREATE VIEW ` + view + ` AS SELECT * FROM ` + table + `; END IF; END $do$`
	// Primary key (wallet_id) for the conflict check; one statement per batch.
	b.sql.upsert = `INSERT INTO ` + table + ` AS b (wallet_id, balance)
		SELECT * FROM unnest($1::text[], $2::bigint[])
		ON CONFLICT (wallet_id) DO UPDATE SET balance = b.balance + EXCLUDED.balance, updated_at = now()`
	// Primary key lookup, through the view.
	b.sql.balance = `SELECT balance FROM ` + s + `.` + BalancesView + ` WHERE wallet_id = $1`
	// Primary keys of read_model_views and checkpoints.
	b.sql.checkpoint = `SELECT transaction_id, position FROM ` + s + `.checkpoints WHERE name =
		coalesce((SELECT projection FROM ` + s + `.read_model_views WHERE view_name = ` + quoteLiteral(view) + `), $1)`
	r, err := projection.New(store, name, query.New(query.Item{Types: EventTypes}), b.apply,
		&projection.Config{BatchSize: b.cfg.BatchSize, Tables: []string{name}, Views: []string{BalancesView},
			ReaderConfig: projection.ReaderConfig{PollInterval: b.cfg.PollInterval}})
	if err != nil {
		panic(err) // a constant name and query, and validated sizes
	}
	b.runner = r
	return b
}

// Setup creates the read model's table if it does not exist, and the view
// over it if there is none.
func (b *Balances) Setup(ctx context.Context) error {
	for _, q := range []string{b.sql.setup, b.sql.view} {
		if _, err := b.store.Pool().Exec(ctx, q); err != nil {
			return fmt.Errorf("wallet: balances setup: %w", err)
		}
	}
	return nil
}

// quoteLiteral is s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Projection is the read model's projection (status, pause, reset), of
// this version.
func (b *Balances) Projection() *projection.Runner { return b.runner }

// Run runs the read model's projection until ctx ends (it then returns nil).
func (b *Balances) Run(ctx context.Context) error {
	err := b.runner.Run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// apply is the projection's handler: one upsert of the batch's deltas.
func (b *Balances) apply(ctx context.Context, tx pgx.Tx, events []pgdcb.StoredEvent) error {
	deltas := map[string]int64{}
	var order []string
	for _, ev := range events {
		id, _ := ev.Tags.Get(TagKey)
		d, err := Delta(ev)
		if err != nil {
			return fmt.Errorf("wallet: balances: event %d: %w", ev.Position, err)
		}
		if _, ok := deltas[id]; !ok {
			order = append(order, id)
		}
		deltas[id] += d
	}
	amounts := make([]int64, len(order))
	for i, id := range order {
		amounts[i] = deltas[id]
	}
	if _, err := tx.Exec(ctx, b.sql.upsert, order, amounts); err != nil {
		return fmt.Errorf("wallet: balances: apply: %w", err)
	}
	return nil
}

// Balance returns a wallet's balance in the read model once the model holds
// every event of the wallet committed before the call — read-your-writes: a
// client that transferred, then asks, sees its transfer. It reads the
// wallet's last event (ReadLast, one index probe) and waits for the
// projection to pass it (projection.Runner.WaitFor), at most ReadWait, then
// fails with ErrReadModelBehind. ok is false if the model has not seen the
// wallet.
func (b *Balances) Balance(ctx context.Context, id string) (balance int64, ok bool, err error) {
	balance, _, ok, err = b.balanceAt(ctx, id)
	return balance, ok, err
}

// balanceAt is Balance, and the wallet's version the balance is at: the
// point of the wallet's last event, read again after the balance (an event
// committed meanwhile may be in it: then again, a few times). version is
// nil when the wallet kept changing.
func (b *Balances) balanceAt(ctx context.Context, id string) (balance int64, version *cursor.Cursor, ok bool, err error) {
	last, err := b.lastEvent(ctx, id)
	if err != nil {
		return 0, nil, false, err
	}
	for range 3 {
		if last != nil {
			wctx, cancel := context.WithTimeout(ctx, b.cfg.ReadWait)
			err := b.runner.WaitFor(wctx, *last)
			cancel()
			if err != nil {
				if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) || errors.Is(err, projection.ErrNotActive) {
					return 0, nil, false, fmt.Errorf("%w: %w", ErrReadModelBehind, err)
				}
				return 0, nil, false, fmt.Errorf("wallet: balances: %w", err)
			}
		}
		err = b.store.Pool().QueryRow(ctx, b.sql.balance, id).Scan(&balance)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil, false, nil
		}
		if err != nil {
			return 0, nil, false, fmt.Errorf("wallet: balances: %w", err)
		}
		again, err := b.lastEvent(ctx, id)
		if err != nil {
			return 0, nil, false, err
		}
		if again != nil && last != nil && *again == *last {
			return balance, last, true, nil
		}
		last = again
	}
	return balance, nil, true, nil
}

// lastEvent is the point of the wallet's last event (nil: none).
func (b *Balances) lastEvent(ctx context.Context, id string) (*cursor.Cursor, error) {
	last, _, err := b.store.ReadLast(ctx, Query(id))
	if err != nil {
		return nil, fmt.Errorf("wallet: balances: %w", err)
	}
	if last == nil {
		return nil, nil
	}
	return &cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}, nil
}

// Checkpoint returns the position in the log of the balances readers read:
// the checkpoint of the version the view shows (read_model_views names it,
// docs/LIFECYCLE.md), this version's before any serves it, the start before
// the projection first ran.
func (b *Balances) Checkpoint(ctx context.Context) (cursor.Cursor, error) {
	var c cursor.Cursor
	err := b.store.Pool().QueryRow(ctx, b.sql.checkpoint, b.runner.Name()).Scan(&c.TransactionID, &c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return cursor.Start, nil
	}
	if err != nil {
		return cursor.Cursor{}, fmt.Errorf("wallet: balances: %w", err)
	}
	return c, nil
}

// WaitFor waits until the read model holds every event up to target (the
// Cursor of an append or a command's last event), or ctx ends: see
// projection.Runner.WaitFor. The projection must be running (Run), here or
// in another process.
func (b *Balances) WaitFor(ctx context.Context, target cursor.Cursor) error {
	return b.runner.WaitFor(ctx, target)
}
