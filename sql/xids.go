package sql

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// TransactionIDsAheadError says that the log holds transaction ids the server
// has not handed out yet: the schema was restored from a dump into another
// cluster (or the cluster's counter was reset). Appending now would sort new
// events before old ones, so tailing readers would skip them; run
// RebaseTransactionIDs (`pgdcb rebase-xids`) first.
type TransactionIDsAheadError struct {
	Schema string
	// Stored is the highest transaction id in the log.
	Stored uint64
	// Next is the id the server will hand out next.
	Next uint64
}

func (e *TransactionIDsAheadError) Error() string {
	return fmt.Sprintf("pgdcb: schema %q holds transaction id %d but this server hands out %d next: the log was restored into another cluster; run sql.RebaseTransactionIDs (`pgdcb rebase-xids`) before appending",
		e.Schema, e.Stored, e.Next)
}

// Is makes errors.Is(err, pgdcb.ErrTransactionIDsAhead) true.
func (e *TransactionIDsAheadError) Is(target error) bool {
	return target == pgdcb.ErrTransactionIDsAhead
}

// CheckTransactionIDs returns a *TransactionIDsAheadError when the log's
// highest transaction id is not below the server's next one. It reads one
// index entry (the head of events_log_order) and assigns no transaction id.
func CheckTransactionIDs(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	q, err := Quote(schema)
	if err != nil {
		return err
	}
	var stored, next uint64
	err = pool.QueryRow(ctx, `SELECT coalesce((SELECT transaction_id FROM `+q+`.events
			ORDER BY transaction_id DESC, position DESC LIMIT 1), '0')::text::numeric,
		pg_snapshot_xmax(pg_current_snapshot())::text::numeric`).Scan(&stored, &next)
	if err != nil {
		return errfmt.Errorf("pgdcb: checking transaction ids: %w", err)
	}
	if stored >= next {
		return &TransactionIDsAheadError{Schema: schema, Stored: stored, Next: next}
	}
	return nil
}

// rebaseBurnBatch is how many empty transactions one round trip runs while
// advancing the counter.
const rebaseBurnBatch = 1000

// RebaseTransactionIDs rewrites the schema's stored transaction ids (events,
// commands, checkpoints) to 3, 4, 5, … in their order, below the server's
// counter, so that new appends sort after every stored event again. Use it
// once after restoring a dump into another cluster (CheckTransactionIDs
// reports the need); on a healthy log it is harmless but rewrites every row.
//
// When the log holds more distinct ids than the server has handed out, it
// first advances the counter by running that many empty transactions (about
// 50,000 a second). The rewrite itself is one transaction holding EXCLUSIVE
// locks on the tables: run it while no process appends or follows the log
// (cursors and checkpoints held in memory keep the old ids; checkpoints in
// the table are rewritten).
//
// It returns how many distinct transaction ids it mapped, and how many it
// consumed first to move the server's counter above the mapped range.
func RebaseTransactionIDs(ctx context.Context, pool *pgxpool.Pool, schema string) (mapped, burned int64, err error) {
	q, err := Quote(schema)
	if err != nil {
		return 0, 0, err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Release()
	var ids, next int64
	err = conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM (SELECT transaction_id FROM `+q+`.events
			UNION SELECT transaction_id FROM `+q+`.commands
			UNION SELECT transaction_id FROM `+q+`.checkpoints WHERE transaction_id <> '0') d),
		pg_snapshot_xmax(pg_current_snapshot())::text::bigint`).Scan(&ids, &next)
	if err != nil {
		return 0, 0, errfmt.Errorf("pgdcb: rebase: counting transaction ids: %w", err)
	}
	// The rebase's own transaction must get an id above ids+2; leave room
	// for the transactions other sessions start meanwhile.
	if need := ids + 3 + 16 - next; need > 0 {
		if err := burnTransactionIDs(ctx, conn.Conn(), need); err != nil {
			return 0, 0, err
		}
		burned = need
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT `+q+`.rebase_transaction_ids()`).Scan(&mapped)
	})
	if err != nil {
		return 0, burned, errfmt.Errorf("pgdcb: rebase: %w", err)
	}
	return mapped, burned, nil
}

// burnTransactionIDs runs n transactions that each take a transaction id and
// commit, pipelined: a Sync after each statement makes it its own transaction.
func burnTransactionIDs(ctx context.Context, conn *pgx.Conn, n int64) error {
	for n > 0 {
		k := min(n, rebaseBurnBatch)
		p := conn.PgConn().StartPipeline(ctx)
		for range k {
			p.SendQueryParams(`SELECT pg_current_xact_id()`, nil, nil, nil, nil)
			p.SendPipelineSync()
		}
		err := p.Flush()
		// Close reads every result and reports the first error.
		if cerr := p.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return errfmt.Errorf("pgdcb: rebase: advancing the transaction counter: %w", err)
		}
		n -= k
	}
	return nil
}
