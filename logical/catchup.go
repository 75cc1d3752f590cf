package logical

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pgdcb/pgdcb"
)

// catchUp is a catch-up through the SQL interface in progress
// (Config.CatchUpBytes): a connection of its own, holding a temporary copy
// of the reader's slot, and the rows of the current call of
// pg_logical_slot_get_binary_changes on it.
//
// The copy starts where the reader's slot was last confirmed; the calls
// consume the copy, never the reader's slot, whose position moves only by
// Confirm (pg_replication_slot_advance, at most every StatusInterval): a
// crash anywhere resumes from the stored checkpoint, as after the stream.
// The copy is temporary: the server drops it when its session ends,
// whatever ends it.
type catchUp struct {
	conn *pgx.Conn
	tmp  string
	rows pgx.Rows // the current call's; nil between calls
	n    int      // rows of the current call read so far
	// short: the last call returned fewer rows than CatchUpChunk (it read
	// to the end of the WAL flushed when it ran).
	short bool
	bin   bool // pgoutput's binary option (PostgreSQL 14+)
}

// catchUpFactor: a streaming reader switches to a catch-up when it is this
// many times CatchUpBytes behind (hysteresis: the catch-up hands back to the
// stream once a call reaches the end of the WAL).
const catchUpFactor = 8

// catchUpAfter: a stream younger than this does not switch to a catch-up
// (its position is known only once it has read or been told where it is).
var catchUpAfter = 5 * time.Second // a variable for the package's tests

// behind is how many bytes of WAL the server has flushed beyond lsn.
func (r *Reader) behind(ctx context.Context, lsn pglogrepl.LSN) (int64, error) {
	db, err := r.sampleConn(ctx)
	if err != nil {
		return 0, err
	}
	var n int64
	if err := db.QueryRow(ctx, `SELECT (pg_current_wal_flush_lsn() - $1::pg_lsn)::bigint`, lsn.String()).Scan(&n); err != nil {
		r.closeSampleConn(ctx)
		return 0, fmt.Errorf("pgdcb: logical: reading the WAL position: %w", err)
	}
	return n, nil
}

// beginCatchUp copies the reader's slot to a temporary slot of a
// connection of its own and moves the copy to the checkpoint; Next then
// reads from it (catchUpNext).
func (r *Reader) beginCatchUp(ctx context.Context) error {
	if err := r.checkSlot(ctx); err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, r.store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return fmt.Errorf("pgdcb: logical: catch-up connection: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	tmp := r.cfg.Slot + "_c" + hex.EncodeToString(rnd[:])
	if len(tmp) > 63 {
		tmp = tmp[len(tmp)-63:]
	}
	// Temporary: dropped by the server when this session ends. Then moved
	// to the checkpoint, which may be beyond the slot's confirmed position
	// (a crash between a batch's commit and its Confirm): what lies before
	// is decoded without output (fast-forward), not sent to be dropped.
	_, err = conn.Exec(ctx, `SELECT pg_copy_logical_replication_slot($1, $2, true)`, r.cfg.Slot, tmp)
	if err == nil {
		// pg_replication_slots: one row per slot.
		_, err = conn.Exec(ctx, `SELECT pg_replication_slot_advance(slot_name, $2::pg_lsn) FROM pg_replication_slots
			WHERE slot_name = $1 AND confirmed_flush_lsn < $2::pg_lsn`, tmp, r.cp.LSN.String())
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("pgdcb: logical: copying slot %s for a catch-up: %w", r.cfg.Slot, err)
	}
	r.cu = &catchUp{conn: conn, tmp: tmp, bin: binaryColumns(conn.PgConn())}
	r.resume()
	return nil
}

// resume sets the reader to read from its checkpoint: whatever was read
// but not handed out is read again, the first Skip rows of the transaction
// at the checkpoint's LSN dropped.
func (r *Reader) resume() {
	r.skipAt, r.skipN = r.cp.LSN, r.cp.Skip
	r.passed, r.received = r.cp.LSN, r.cp.LSN
	r.cur, r.ready = nil, nil
	r.rel = map[uint32]*relation{}
	r.nextStatus = time.Now().Add(r.cfg.StatusInterval)
}

// catchUpNext is Next during a catch-up: whole transactions from the
// calls' rows, up to max events. After a call that read to the end of the
// WAL, it switches to the stream, from the checkpoint.
//
// A call consumes its rows from the copy before it returns the first (the
// server builds the whole result first): after an error in the middle of
// one, the rest of its rows are gone from the copy, so any error ends the
// catch-up, and the next Next starts over from the checkpoint with a new
// copy.
func (r *Reader) catchUpNext(ctx context.Context, max int, wait time.Duration) (b Batch, err error) {
	defer func() {
		if err != nil {
			_ = r.endCatchUp(context.WithoutCancel(ctx))
		}
	}()
	cu := r.cu
	var evs []pgdcb.StoredEvent
	for {
		evs = r.take(evs, max)
		if len(evs) >= max {
			break
		}
		if cu.rows == nil {
			if cu.short {
				if len(evs) > 0 {
					break // hand them out first
				}
				if err := r.endCatchUp(ctx); err != nil {
					return Batch{}, err
				}
				if err := r.start(ctx); err != nil {
					return Batch{}, err
				}
				return r.Next(ctx, max, wait)
			}
			args := []string{"'proto_version', '1'", "'publication_names', " + quoteLiteral(r.cfg.Publication)}
			if cu.bin {
				args = append(args, "'binary', 'true'")
			}
			rows, err := cu.conn.Query(ctx, `SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, $2, `+
				strings.Join(args, ", ")+`)`, cu.tmp, r.cfg.CatchUpChunk)
			if err != nil {
				return Batch{}, fmt.Errorf("pgdcb: logical: catch-up of slot %s: %w", r.cfg.Slot, err)
			}
			cu.rows, cu.n = rows, 0
		}
		// Rows until a transaction is complete (take hands it out) or the
		// call's end.
		for len(r.ready) == 0 {
			if !cu.rows.Next() {
				cu.rows.Close()
				err := cu.rows.Err()
				cu.rows = nil
				if err != nil {
					return Batch{}, fmt.Errorf("pgdcb: logical: catch-up of slot %s: %w", r.cfg.Slot, err)
				}
				cu.short = cu.n < r.cfg.CatchUpChunk
				if cu.short {
					if err := r.passCall(ctx); err != nil {
						return Batch{}, err
					}
				}
				break
			}
			cu.n++
			if err := r.logical(ctx, cu.rows.RawValues()[0], time.Time{}); err != nil {
				return Batch{}, err
			}
		}
	}
	return Batch{Events: evs, Checkpoint: r.checkpoint(), Tail: r.tail}, nil
}

// passCall, after a call that read to the end of the WAL (nothing in
// flight): every transaction that ends before the copy's new confirmed
// position (where the call's decoding stopped) was returned, so the stream
// has passed it, as after a keepalive of the stream.
func (r *Reader) passCall(ctx context.Context) error {
	var text string
	// pg_replication_slots: one row per slot.
	if err := r.cu.conn.QueryRow(ctx, `SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1`, r.cu.tmp).Scan(&text); err != nil {
		return fmt.Errorf("pgdcb: logical: catch-up of slot %s: %w", r.cfg.Slot, err)
	}
	lsn, err := pglogrepl.ParseLSN(text)
	if err != nil {
		return fmt.Errorf("pgdcb: logical: catch-up of slot %s: %w", r.cfg.Slot, err)
	}
	if r.cur == nil && len(r.ready) == 0 && lsn > r.passed {
		r.passed = lsn
		if r.cp.LSN < lsn {
			r.cp = Checkpoint{LSN: lsn}
		}
		r.passSample()
	}
	return nil
}

// endCatchUp closes the catch-up's connection (the server drops the
// temporary slot with its session).
func (r *Reader) endCatchUp(ctx context.Context) error {
	cu := r.cu
	if cu == nil {
		return nil
	}
	r.cu = nil
	// Not cu.rows.Close: it would read the rest of the call's rows.
	return cu.conn.Close(ctx)
}

// advance moves the reader's slot to r.flush (a stored checkpoint) while no
// stream reads it: pg_replication_slot_advance decodes the WAL up to there
// without output.
func (r *Reader) advance(ctx context.Context) error {
	r.nextStatus = time.Now().Add(r.cfg.StatusInterval)
	// pg_replication_slots: one row per slot.
	_, err := r.store.Pool().Exec(ctx, `SELECT pg_replication_slot_advance(slot_name, $2::pg_lsn) FROM pg_replication_slots
		WHERE slot_name = $1 AND confirmed_flush_lsn < $2::pg_lsn`, r.cfg.Slot, r.flush.String())
	if err != nil {
		return fmt.Errorf("pgdcb: logical: advancing slot %s to %s: %w", r.cfg.Slot, r.flush, err)
	}
	return nil
}

// binaryColumns reports whether the server takes pgoutput's binary option
// (PostgreSQL 14 and later).
func binaryColumns(pc *pgconn.PgConn) bool {
	v := pc.ParameterStatus("server_version")
	if i := strings.IndexFunc(v, func(c rune) bool { return c < '0' || c > '9' }); i >= 0 {
		v = v[:i]
	}
	major, err := strconv.Atoi(v)
	return err == nil && major >= 14
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
