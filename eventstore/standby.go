package eventstore

import (
	"errors"
	"strconv"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
)

// Decision reads on a hot standby (docs/REPLICAS.md).
//
// During recovery pg_current_snapshot() lists no running transactions: the
// server keeps the primary's running ids where the SQL functions do not show
// them, so `xmin:xmax:` there would count every transaction in progress on
// the primary as seen, and an AppendIf after such a cursor would commit
// blind. A read on a standby therefore builds its cursor from what the
// standby can prove, in the read's own statement (same snapshot):
//
//   - every id below the snapshot's xmin has ended (the standby's snapshot
//     is an MVCC snapshot: an id below xmin is never running there, and the
//     standby only knows ids whose WAL the primary flushed, so the primary
//     never hands one out again);
//   - an id at or above xmin has ended and is visible when the read sees an
//     event it wrote (a transaction's events become visible together).
//
// Every other id from xmin up to the head of the log is listed in the
// cursor's snapshot as in progress: not seen. Those that ended without
// writing an event are harmless there (no event can match a condition), so
// the cursor's seen set is exactly the events the standby showed: an AppendIf
// after it fails when, and only when, a matching event exists that the read
// did not see. A standby that is behind makes conflicts more likely (events
// committed on the primary but not yet replayed are unseen), never a blind
// commit.

// Bounds of the proof, so that a read behind a long transaction stays cheap
// and its cursor short: it steps through at most provenMaxSteps transactions
// that wrote events from xmin on (ids that wrote none cost no step), and its
// cursor lists at most provenMaxGaps ids as in progress. A read past either
// bound runs again on the primary (fallback), so that the events it returns
// and its cursor always agree.
const (
	provenMaxSteps = 100
	provenMaxGaps  = 2000
)

// provenJoin joins, to a statement whose one-row FROM item has the snapshot
// snap, relation pv with columns
//
//	pv.rec   bool      the server is in recovery (a standby)
//	pv.past  bool      in recovery: the snapshot's xmin is not above the
//	                   parameter past (Store.proofPast), so the proof is
//	                   past its bounds without being run
//	pv.txs   bigint[]  in recovery, unless past: the ids from xmin on that
//	                   wrote a visible event, ascending, at most
//	                   provenMaxSteps+1 of them
//
// A long transaction holds xmin while the log grows: once a read's proof was
// past its bounds, that of a later read with the same xmin almost always is
// too (the ids from xmin to the head only grow), so reads skip it until xmin
// moves on. Skipping only ever sends a read to the primary.
//
// Sent only by a decision read that may run on a standby (proofSQL). Cost on
// a primary: one function call (the recursion is empty). On a standby: one
// probe of events_log_order per transaction that wrote events from xmin on
// (the first event after the previous one's id), whatever the number of ids
// between them.
func provenJoin(events, snap, past string) string {
	steps := strconv.Itoa(provenMaxSteps)
	xmin := `pg_snapshot_xmin(` + snap + `)`
	return `
		CROSS JOIN LATERAL (SELECT pg_is_in_recovery() AS rec) pr
		CROSS JOIN LATERAL (SELECT pr.rec, pr.rec AND ` + xmin + `::text::bigint <= ` + past + `::bigint AS past, ARRAY(
			-- events_log_order, one probe per transaction with events: the
			-- first id after the previous one. (ORDER BY and LIMIT fix the
			-- index path, as xid8's = has no selectivity estimate.)
			WITH RECURSIVE w(tx, n) AS (
				SELECT (SELECT x.transaction_id FROM ` + events + ` x WHERE x.transaction_id >= ` + xmin + `
					ORDER BY x.transaction_id LIMIT 1), 1
				WHERE pr.rec AND ` + xmin + `::text::bigint > ` + past + `::bigint
				UNION ALL
				SELECT (SELECT x.transaction_id FROM ` + events + ` x WHERE x.transaction_id > w.tx
					ORDER BY x.transaction_id LIMIT 1), w.n + 1
				FROM w WHERE w.tx IS NOT NULL AND w.n <= ` + steps + `)
			SELECT w.tx::text::bigint FROM w WHERE w.tx IS NOT NULL ORDER BY w.tx) AS txs
			-- (OFFSET 0: evaluated once, not pulled up into the select
			-- list and run again for every event the read returns.)
			OFFSET 0) pv`
}

// errProofExceeded is foldFrom's signal that its read must run again on the
// primary (proof.exceeded).
var errProofExceeded = errors.New("pgdcb: standby proof past its bounds")

// proved reports whether a decision read on db carries the standby proof
// (proofSQL): on a store with Config.ReadPool (a standby may serve it, or a
// caller's transaction on one), or in a caller's transaction whose server
// does not report that it is a primary (in_hot_standby, reported by
// PostgreSQL 14 and later, also when a standby is promoted). A store without
// a read pool reads on its primary, where the proof is empty.
func (s *Store) proved(db dbtx) bool {
	if s.cfg.ReadPool != nil {
		return true
	}
	tx, ok := db.(pgx.Tx)
	if !ok || tx.Conn() == nil {
		return false
	}
	return tx.Conn().PgConn().ParameterStatus("in_hot_standby") != "off"
}

// proofSQL returns what a decision read adds to its select list (after a
// comma) and its join: provenColumns and provenJoin when proved, nothing
// otherwise; newProof scans them. past is the placeholder of the parameter
// Store.proofArg.
func (s *Store) proofSQL(proved bool, snap, past string) (columns, join string) {
	if !proved {
		return "", ""
	}
	return ", " + provenColumns, provenJoin(s.sql.events, snap, past)
}

// proofArg is the parameter past of provenJoin.
func (s *Store) proofArg() int64 { return int64(s.proofPast.Load()) }

// newProof returns the proof of a read whose statement carries proofSQL's
// columns when proved; otherwise one that scans nothing and proves nothing.
func (s *Store) newProof(proved bool) proof {
	return proof{used: proved, past: &s.proofPast}
}

// provenColumns is the select list of provenJoin, scanned by proof.dest.
const provenColumns = `pv.rec, pv.past, pv.txs`

// proof is what provenColumns return.
type proof struct {
	used    bool           // the statement has provenColumns (newProof)
	past    *atomic.Uint64 // Store.proofPast
	rec     bool
	skipped bool // pv.past
	txs     []int64
}

// dest returns the scan destinations of provenColumns, none when the
// statement has none.
func (p *proof) dest() []any {
	if !p.used {
		return nil
	}
	return []any{&p.rec, &p.skipped, &p.txs}
}

// exceeded reports whether the proof of a read whose head is c (a cursor
// with the read's snapshot) is past its bounds, or was skipped as such: the
// read must then run again on the primary. A proof found past its bounds
// records its xmin in Store.proofPast.
func (p *proof) exceeded(c cursor.Cursor) bool {
	if !p.rec || c.Snapshot == nil {
		return false
	}
	if p.skipped {
		return true
	}
	if len(p.txs) <= provenMaxSteps && p.gaps(c) <= provenMaxGaps {
		return false
	}
	p.past.Store(c.Snapshot.Xmin)
	return true
}

// gaps is the number of ids from the snapshot's xmin to c that wrote no
// visible event: those c's snapshot lists as in progress.
func (p *proof) gaps(c cursor.Cursor) uint64 {
	xmin := c.Snapshot.Xmin
	if c.TransactionID < xmin {
		return 0
	}
	n := c.TransactionID - xmin + 1
	for _, x := range p.txs {
		if uint64(x) >= xmin && uint64(x) <= c.TransactionID {
			n--
		}
	}
	return n
}

// cursor returns c (a cursor whose Snapshot is the read's, within the
// bounds: exceeded is false for the read's head) as the read can prove it on
// a standby: on a primary c itself. On a standby the snapshot becomes
// xmin:point+1 with every id from xmin to the point that wrote no visible
// event listed as in progress.
func (p *proof) cursor(c cursor.Cursor) cursor.Cursor {
	if !p.rec || c.Snapshot == nil {
		return c
	}
	xmin := c.Snapshot.Xmin
	snap := &cursor.Snapshot{Xmin: xmin, Xmax: max(xmin, c.TransactionID+1)}
	if c.TransactionID >= xmin {
		snap.Xip = make([]uint64, 0, p.gaps(c))
		i := 0
		for x := xmin; x <= c.TransactionID; x++ {
			for i < len(p.txs) && uint64(p.txs[i]) < x {
				i++
			}
			if i < len(p.txs) && uint64(p.txs[i]) == x {
				continue
			}
			snap.Xip = append(snap.Xip, x)
		}
	}
	c.Snapshot = snap
	return c
}
