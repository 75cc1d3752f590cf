package main

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/query"
)

var importCmd = &command{
	name: "import", args: "[-force | -resume] [-async-commit] [-batch N] [-progress N] < FILE",
	summary: "restore export's NDJSON from stdin: one transaction per source transaction, recorded times kept",
	detail: `Keeps each event's type, tags, data, metadata, id and recorded time
(occurred_at), their order, and the source's transactions: the lines of one
transaction_id (consecutive, as export writes them) are committed together,
one transaction each, in input order. The log assigns its own positions and
transaction ids. Lines without transaction_id are committed -batch at a time;
without occurred_at they get the import's time. Runs as the schema's owner
(the role that migrates), since it chooses the recorded times.

Refuses a non-empty log unless -force (append after it) or -resume. A source
transaction is imported whole or not at all: an import that fails says how far
it got, and -resume continues it: it checks that the log holds exactly the
input's first events (their count, and the last of them) and imports the rest.
Rerunning without -resume stops at the first stored event id (exit 5).

Each commit waits for the server's disk. -async-commit lets all but the last
one return before (synchronous_commit=off: several times faster on a log of
small transactions): a server crash during the import then loses its last
transactions (whole ones; -resume continues), so let no reader follow the log
before the import ends.
`,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		force := fs.Bool("force", false, "import into a log that already holds events")
		resume := fs.Bool("resume", false, "continue an import that stopped: skip the input's events the log holds")
		batch := fs.Int("batch", 500, "events per server call (a larger source transaction takes several, in one transaction)")
		progress := fs.Int("progress", 10000, "report progress on stderr every N events (0: never)")
		async := fs.Bool("async-commit", false, "do not wait for the disk at each commit but the last (see above)")
		return func(e *env) error {
			if *batch <= 0 || *progress < 0 {
				return &pgdcb.InvalidArgumentError{Name: "-batch/-progress", Reason: "-batch must be positive, -progress not negative"}
			}
			if *force && *resume {
				return usagef("-force excludes -resume")
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			head, err := store.Head(e.ctx)
			if err != nil {
				return err
			}
			cfg := store.Config()
			im := &importer{e: e, store: store, batch: min(*batch, cfg.MaxBatchSize), maxBytes: cfg.MaxBatchBytes, progress: int64(*progress), cur: head}
			if (head.TransactionID != 0 || head.Position != 0) && !*force {
				if !*resume {
					return fmt.Errorf("%w: the log is not empty (head %s); pass -resume to continue an import that stopped, -force to append after it", errPrecondition, head)
				}
				if err := im.startResume(); err != nil {
					return err
				}
			}
			conn, err := store.Pool().Acquire(e.ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			im.conn = conn
			if *async {
				if _, err := conn.Exec(e.ctx, "SET synchronous_commit = off"); err != nil {
					return err
				}
				defer conn.Exec(context.WithoutCancel(e.ctx), "RESET synchronous_commit")
			}
			im.start = time.Now()
			err = readNDJSON(e.stdin, im.line)
			if err == nil && *async && im.groupN > 0 {
				// The last commit waits for the disk, and so for every
				// commit before it.
				if err = im.send(); err == nil {
					_, err = im.tx.Exec(e.ctx, "SET LOCAL synchronous_commit = on")
				}
			}
			if err == nil {
				err = im.endGroup()
			}
			if err != nil {
				im.rollback()
				return im.failed(err)
			}
			if im.n > 0 {
				store.Notify(e.ctx) // wake tailing readers at once
			}
			if im.skip > 0 {
				return fmt.Errorf("%w: the log holds %d events, the input only %d: it is not this input's import", errPrecondition, im.skipped+im.skip, im.skipped)
			}
			if e.json {
				return e.writeJSON(map[string]any{"imported": im.n, "transactions": im.txs, "skipped": im.skipped, "cursor": im.cur.String()})
			}
			_, err = fmt.Fprintf(e.stdout, "imported %d events in %d transaction(s); cursor %s\n", im.n, im.txs, im.cur)
			if err == nil && im.skipped > 0 {
				_, err = fmt.Fprintf(e.stdout, "(resumed: the first %d events were in the log already)\n", im.skipped)
			}
			return err
		}
	},
}

// importer commits the input one source transaction at a time: the lines of
// one transaction_id, or -batch lines without one, in one transaction of
// the store, sent -batch events per ImportTx call.
type importer struct {
	e        *env
	store    *eventstore.Store
	conn     *pgxpool.Conn // one session for the whole import
	batch    int           // events per ImportTx call
	maxBytes int           // and bytes (the store's MaxBatchBytes)
	progress int64
	start    time.Time

	tx           pgx.Tx // the open transaction of the current group, nil between groups
	groupTx      uint64 // the source transaction id of the current group (0: none)
	groupN       int    // events of the current group so far
	from         int    // its first line
	pending      []pgdcb.StoredEvent
	pendingBytes int

	n, txs, last int64 // events and transactions committed, progress reports made
	lastLine     int   // the last line committed
	cur          cursor.Cursor

	// -resume: events of the input still to skip (the log holds them), the
	// log's last event, and how many were skipped.
	skip, skipped int64
	tail          *pgdcb.StoredEvent
	tailTx        uint64 // the source transaction of the last skipped line
}

func (im *importer) line(line int, j jsonEvent, ev pgdcb.Event) error {
	se := pgdcb.StoredEvent{Event: ev}
	// JSON null stays null (jsonEvent.event makes append -stdin's {} and nil).
	if string(j.Data) == "null" {
		se.Data = j.Data
	}
	if string(j.Metadata) == "null" {
		se.Metadata = j.Metadata
	}
	if j.OccurredAt != "" {
		t, err := time.Parse(time.RFC3339Nano, j.OccurredAt)
		if err != nil {
			return fmt.Errorf("%w: stdin line %d: occurred_at %q: %v", pgdcb.ErrInvalidEvent, line, j.OccurredAt, err)
		}
		se.OccurredAt = t
	}
	if im.skip > 0 {
		return im.skipLine(line, j, se)
	}
	if im.skipped > 0 && im.n == 0 && im.groupN == 0 && j.TransactionID != 0 && j.TransactionID == im.tailTx {
		return fmt.Errorf("%w: the log ends inside the input's transaction %d (line %d): it is not this input's import", errPrecondition, j.TransactionID, line)
	}
	if im.groupN > 0 && (j.TransactionID != im.groupTx || (im.groupTx == 0 && im.groupN >= im.batch)) {
		if err := im.endGroup(); err != nil {
			return err
		}
	}
	if im.groupN == 0 {
		im.groupTx, im.from = j.TransactionID, line
	}
	if size := se.Size(); len(im.pending) > 0 && im.pendingBytes+size > im.maxBytes {
		if err := im.send(); err != nil {
			return err
		}
	}
	im.groupN++
	im.pending = append(im.pending, se)
	im.pendingBytes += se.Size()
	if len(im.pending) >= im.batch {
		return im.send()
	}
	return nil
}

// send imports the pending events in the group's transaction, begun here.
func (im *importer) send() error {
	if len(im.pending) == 0 {
		return nil
	}
	if im.tx == nil {
		tx, err := im.conn.Begin(im.e.ctx)
		if err != nil {
			return err
		}
		im.tx = tx
	}
	res, err := im.store.ImportTx(im.e.ctx, im.tx, im.pending)
	if err != nil {
		return err
	}
	im.pending, im.pendingBytes = im.pending[:0], 0
	im.cur = res.Cursor()
	return nil
}

// endGroup commits the current group.
func (im *importer) endGroup() error {
	if im.groupN == 0 {
		return nil
	}
	if err := im.send(); err != nil {
		return err
	}
	err := im.tx.Commit(im.e.ctx)
	im.tx = nil
	if err != nil {
		return err
	}
	im.n += int64(im.groupN)
	im.txs++
	im.lastLine = im.from + im.groupN - 1
	im.groupN = 0
	if im.progress > 0 && im.n/im.progress > im.last {
		im.last = im.n / im.progress
		el := time.Since(im.start).Round(time.Millisecond)
		im.e.note(map[string]any{"progress": "import", "events": im.n, "elapsed": el.String()}, "pgdcb: import: %d events (%s)", im.n, el)
	}
	return nil
}

func (im *importer) rollback() {
	if im.tx != nil {
		_ = im.tx.Rollback(context.WithoutCancel(im.e.ctx))
		im.tx = nil
	}
}

// failed says how far the import got: whole source transactions only.
func (im *importer) failed(err error) error {
	where := fmt.Sprintf("after %d events imported", im.n)
	if im.n > 0 {
		where += fmt.Sprintf(" in %d transactions (stdin through line %d)", im.txs, im.lastLine)
	}
	if im.skipped > 0 {
		where += fmt.Sprintf(", %d skipped before", im.skipped)
	}
	if im.groupN > 0 {
		where += fmt.Sprintf("; the transaction from line %d was not (pgdcb import -resume continues)", im.from)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// startResume reads what the log holds: as many events as it has must be
// skipped, and the last of them must be the log's last.
func (im *importer) startResume() error {
	ctx := im.e.ctx
	if err := im.store.Pool().QueryRow(ctx, `SELECT count(*) FROM `+ident.Schema(im.store)+`.events`).Scan(&im.skip); err != nil {
		return fmt.Errorf("count the log's events: %w", err)
	}
	last, _, err := im.store.ReadLast(ctx, query.All())
	if err != nil {
		return fmt.Errorf("read the log's last event: %w", err)
	}
	im.tail = last
	return nil
}

// skipLine skips one input event the log holds, and checks the last one
// against the log's last event.
func (im *importer) skipLine(line int, j jsonEvent, se pgdcb.StoredEvent) error {
	im.skip--
	im.skipped++
	im.tailTx = j.TransactionID
	if im.skip > 0 {
		return nil
	}
	t := im.tail
	same := t.Type == se.Type && slices.Equal(t.Tags.Strings(), se.Tags.Strings()) && t.ID == se.ID &&
		(se.OccurredAt.IsZero() || t.OccurredAt.Equal(se.OccurredAt.Truncate(time.Microsecond)))
	if same {
		// The payloads as jsonb compares them (key order, spacing).
		var meta *string
		if len(se.Metadata) > 0 {
			m := string(se.Metadata)
			meta = &m
		}
		if err := im.store.Pool().QueryRow(im.e.ctx, `SELECT data = $2::jsonb AND metadata IS NOT DISTINCT FROM $3::jsonb
			FROM `+ident.Schema(im.store)+`.events WHERE position = $1`, t.Position, string(se.Data), meta).Scan(&same); err != nil {
			return fmt.Errorf("compare the log's last event: %w", err)
		}
	}
	if !same {
		return fmt.Errorf("%w: the log's last event (position %d, %s) is not line %d of the input, its %dth event: it is not this input's import",
			errPrecondition, t.Position, t.Type, line, im.skipped)
	}
	return nil
}
