package wallet

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// BalancesConfig configures the Balances read model. nil means every default.
type BalancesConfig struct {
	// BatchSize is the most events applied per transaction. Default 500.
	BatchSize int
	// PollInterval is how long Run waits when caught up. Default 50ms.
	PollInterval time.Duration
}

// Balances is the balance read model: a table wallet_balances(wallet_id,
// balance) in the store's schema, maintained by tailing the log with
// Store.ReadTail. Each batch updates the balances and the checkpoint (table
// wallet_balances_checkpoint) in one transaction, so a crash never applies an
// event twice or skips one. Several runners may run: a transaction-level
// advisory lock makes them take turns.
type Balances struct {
	store *eventstore.Store
	cfg   BalancesConfig
	q     query.Query
	lock  int64
	sql   struct{ setup, lock, checkpoint, upsert, saveCheckpoint, balance string }
}

// NewBalances returns the read model over the store. Call Setup once.
func NewBalances(store *eventstore.Store, cfg *BalancesConfig) *Balances {
	b := &Balances{store: store, q: query.New(query.Item{Types: EventTypes})}
	if cfg != nil {
		b.cfg = *cfg
	}
	if b.cfg.BatchSize <= 0 {
		b.cfg.BatchSize = 500
	}
	if b.cfg.PollInterval <= 0 {
		b.cfg.PollInterval = 50 * time.Millisecond
	}
	h := fnv.New64a()
	h.Write([]byte(store.Schema() + ".wallet_balances"))
	b.lock = int64(h.Sum64())
	s := pgx.Identifier{store.Schema()}.Sanitize()
	b.sql.setup = `CREATE TABLE IF NOT EXISTS ` + s + `.wallet_balances (
			wallet_id  text        PRIMARY KEY,
			balance    bigint      NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT now());
		CREATE TABLE IF NOT EXISTS ` + s + `.wallet_balances_checkpoint (
			name           text   PRIMARY KEY,
			transaction_id xid8   NOT NULL,
			position       bigint NOT NULL)`
	b.sql.lock = `SELECT pg_advisory_xact_lock($1)`
	// Primary key lookup.
	b.sql.checkpoint = `SELECT transaction_id, position FROM ` + s + `.wallet_balances_checkpoint WHERE name = 'balances'`
	// Primary key (wallet_id) for the conflict check; one statement per batch.
	b.sql.upsert = `INSERT INTO ` + s + `.wallet_balances AS b (wallet_id, balance)
		SELECT * FROM unnest($1::text[], $2::bigint[])
		ON CONFLICT (wallet_id) DO UPDATE SET balance = b.balance + EXCLUDED.balance, updated_at = now()`
	b.sql.saveCheckpoint = `INSERT INTO ` + s + `.wallet_balances_checkpoint (name, transaction_id, position)
		VALUES ('balances', $1::text::xid8, $2)
		ON CONFLICT (name) DO UPDATE SET transaction_id = EXCLUDED.transaction_id, position = EXCLUDED.position`
	// Primary key lookup.
	b.sql.balance = `SELECT balance FROM ` + s + `.wallet_balances WHERE wallet_id = $1`
	return b
}

// Setup creates the read model's tables if they do not exist.
func (b *Balances) Setup(ctx context.Context) error {
	_, err := b.store.Pool().Exec(ctx, b.sql.setup)
	if err != nil {
		return fmt.Errorf("wallet: balances setup: %w", err)
	}
	return nil
}

// CatchUp applies batches until the read model has every event below the
// horizon, and returns how many events it applied.
func (b *Balances) CatchUp(ctx context.Context) (int, error) {
	total := 0
	for {
		n, more, err := b.step(ctx)
		total += n
		if err != nil || !more {
			return total, err
		}
	}
}

// Run applies events until ctx ends (it then returns nil).
func (b *Balances) Run(ctx context.Context) error {
	for {
		if _, err := b.CatchUp(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(b.cfg.PollInterval):
		}
	}
}

// step applies one batch; more is true when the batch was full.
func (b *Balances) step(ctx context.Context) (n int, more bool, err error) {
	tx, err := b.store.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, false, fmt.Errorf("wallet: balances: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	// The lock and the reads come before the first write: ReadTailTx must run
	// while this transaction has no xid.
	if _, err := tx.Exec(ctx, b.sql.lock, b.lock); err != nil {
		return 0, false, fmt.Errorf("wallet: balances: lock: %w", err)
	}
	var from cursor.Cursor
	err = tx.QueryRow(ctx, b.sql.checkpoint).Scan(&from.TransactionID, &from.Position)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, false, fmt.Errorf("wallet: balances: checkpoint: %w", err)
	}
	batch, err := b.store.ReadTailTx(ctx, tx, b.q, from, b.cfg.BatchSize)
	if err != nil {
		return 0, false, fmt.Errorf("wallet: balances: %w", err)
	}
	if len(batch.Events) == 0 && batch.Cursor.TransactionID == from.TransactionID && batch.Cursor.Position == from.Position {
		return 0, false, nil
	}
	deltas := map[string]int64{}
	var order []string
	for _, ev := range batch.Events {
		id, _ := ev.Tags.Get(TagKey)
		d, err := Delta(ev)
		if err != nil {
			return 0, false, fmt.Errorf("wallet: balances: event %d: %w", ev.Position, err)
		}
		if _, ok := deltas[id]; !ok {
			order = append(order, id)
		}
		deltas[id] += d
	}
	if len(order) > 0 {
		amounts := make([]int64, len(order))
		for i, id := range order {
			amounts[i] = deltas[id]
		}
		if _, err := tx.Exec(ctx, b.sql.upsert, order, amounts); err != nil {
			return 0, false, fmt.Errorf("wallet: balances: apply: %w", err)
		}
	}
	if _, err := tx.Exec(ctx, b.sql.saveCheckpoint, fmt.Sprint(batch.Cursor.TransactionID), batch.Cursor.Position); err != nil {
		return 0, false, fmt.Errorf("wallet: balances: save checkpoint: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, false, fmt.Errorf("wallet: balances: commit: %w", err)
	}
	return len(batch.Events), len(batch.Events) >= b.cfg.BatchSize, nil
}

// Balance returns a wallet's balance in the read model (eventually
// consistent); ok is false if the model has not seen the wallet.
func (b *Balances) Balance(ctx context.Context, id string) (balance int64, ok bool, err error) {
	err = b.store.Pool().QueryRow(ctx, b.sql.balance, id).Scan(&balance)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("wallet: balances: %w", err)
	}
	return balance, true, nil
}

// Checkpoint returns the read model's position in the log.
func (b *Balances) Checkpoint(ctx context.Context) (cursor.Cursor, error) {
	var c cursor.Cursor
	err := b.store.Pool().QueryRow(ctx, b.sql.checkpoint).Scan(&c.TransactionID, &c.Position)
	if errors.Is(err, pgx.ErrNoRows) {
		return cursor.Start, nil
	}
	return c, err
}

// WaitFor applies events until the read model has the event at (txID,
// position) or ctx ends. The tailing read stops at the horizon, so an open
// transaction anywhere in the cluster delays it (never skips an event).
func (b *Balances) WaitFor(ctx context.Context, txID uint64, position int64) error {
	for {
		if _, err := b.CatchUp(ctx); err != nil {
			return err
		}
		cp, err := b.Checkpoint(ctx)
		if err != nil {
			return err
		}
		if cursor.Compare(cp.TransactionID, cp.Position, txID, position) >= 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wallet: balances: waiting for (%d, %d), at (%d, %d): %w",
				txID, position, cp.TransactionID, cp.Position, ctx.Err())
		case <-time.After(b.cfg.PollInterval):
		}
	}
}
