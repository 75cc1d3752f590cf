package eventstore

import (
	"strconv"

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

// Bounds of the proof, so that a read behind a long transaction stays cheap:
// at most provenMaxGaps unproven ids are listed, and at most provenMaxRange
// ids past xmin are examined. Past either bound the cursor moves back to the
// last event before the first id left out, so events after it count as not
// seen (false conflicts, never blind commits).
const (
	provenMaxGaps  = 1000
	provenMaxRange = 10000
)

// provenJoin joins, to a statement whose one-row FROM item has the snapshot
// snap and the head transaction id headTx (NULL for an empty log), relation
// pv with columns
//
//	pv.rec     bool      the server is in recovery (a standby)
//	pv.ids     bigint[]  in recovery: the ids from xmin up to the head that
//	                     wrote no visible event, ascending (NULL when none)
//	pv.cut_at  bigint    the first id past the bounds (NULL when none)
//
// and relation pc: the last event before pv.cut_at (pc.cut_tx, pc.cut_pos,
// NULL when none or no cut).
//
// Sent only by a store with a read pool (proofSQL). Cost on a primary: one
// function call (the series is empty). On a standby:
// one probe of events_log_order per id from xmin to the head (the range is
// the transactions that ran during the read's window, short unless a long
// transaction holds xmin back; bounded by provenMaxRange), and one backward
// step of events_log_order when there is a cut.
func provenJoin(events, snap, headTx string) string {
	gaps, rng := strconv.Itoa(provenMaxGaps), strconv.Itoa(provenMaxRange)
	xmin := `pg_snapshot_xmin(` + snap + `)::text::bigint`
	head := headTx + `::text::bigint`
	return `
		CROSS JOIN LATERAL (SELECT pg_is_in_recovery() AS rec) pr
		CROSS JOIN LATERAL (SELECT pr.rec, m.ids,
				CASE WHEN cardinality(m.ids) > ` + gaps + ` THEN m.ids[` + gaps + ` + 1]
				     WHEN pr.rec AND ` + head + ` >= ` + xmin + ` + ` + rng + ` THEN ` + xmin + ` + ` + rng + ` END AS cut_at
			FROM (SELECT array_agg(g ORDER BY g) AS ids FROM (
				-- events_log_order, one probe per id: the first id at or
				-- after g is g itself when g wrote an event. (The ORDER BY
				-- and LIMIT fix the index path: xid8's = has no selectivity
				-- estimate, and a NOT EXISTS was planned as a hash anti
				-- join over the whole table, or a sequential scan per id.)
				-- Empty off recovery.
				SELECT g FROM generate_series(
					CASE WHEN pr.rec THEN ` + xmin + ` ELSE 1 END,
					CASE WHEN pr.rec THEN least(` + head + `, ` + xmin + ` + ` + rng + ` - 1) ELSE 0 END) g
				WHERE (SELECT x.transaction_id FROM ` + events + ` x WHERE x.transaction_id >= g::text::xid8
					ORDER BY x.transaction_id LIMIT 1) IS DISTINCT FROM g::text::xid8
				ORDER BY g LIMIT ` + gaps + ` + 1) l) m) pv
		-- events_log_order backwards from the cut, one row; the NULL bound
		-- of a read without a cut finds nothing at once.
		LEFT JOIN LATERAL (SELECT transaction_id AS cut_tx, position AS cut_pos FROM ` + events + `
			WHERE transaction_id < pv.cut_at::text::xid8
			ORDER BY transaction_id DESC, position DESC LIMIT 1) pc ON true`
}

// proofSQL returns what a decision read adds to its select list (after a
// comma) and its join: provenColumns and provenJoin when the store has a read
// pool (a standby may serve the read), nothing otherwise (a store without
// Config.ReadPool reads on its primary, where the proof is empty); newProof
// scans them.
func (s *Store) proofSQL(snap, headTx string) (columns, join string) {
	if s.cfg.ReadPool == nil {
		return "", ""
	}
	return ", " + provenColumns, provenJoin(s.sql.events, snap, headTx)
}

// newProof returns the proof of a read whose statement carries
// proofSQL's columns when proved (a decision read) and the store has a read
// pool; otherwise one that scans nothing and proves nothing.
func (s *Store) newProof(proved bool) proof {
	return proof{used: proved && s.cfg.ReadPool != nil}
}

// provenColumns is the select list of provenJoin, scanned by proof.dest.
const provenColumns = `pv.rec, pv.ids, pv.cut_at IS NOT NULL, coalesce(pc.cut_tx, '0'), coalesce(pc.cut_pos, 0)`

// proof is what provenColumns return.
type proof struct {
	used   bool // the statement has provenColumns (newProof)
	rec    bool
	ids    []int64
	cut    bool
	cutTx  uint64
	cutPos int64
}

// dest returns the scan destinations of provenColumns, none when the
// statement has none.
func (p *proof) dest() []any {
	if !p.used {
		return nil
	}
	return []any{&p.rec, &p.ids, &p.cut, &p.cutTx, &p.cutPos}
}

// cursor returns c (a cursor whose Snapshot is the read's) as the read can
// prove it on a standby: on a primary c itself. On a standby the point moves
// back to the cut when past it, and the snapshot becomes xmin:point+1 with
// every unproven id up to the point listed as in progress.
func (p *proof) cursor(c cursor.Cursor) cursor.Cursor {
	if !p.rec || c.Snapshot == nil {
		return c
	}
	if p.cut && cursor.Compare(c.TransactionID, c.Position, p.cutTx, p.cutPos) > 0 {
		c.TransactionID, c.Position = p.cutTx, p.cutPos
	}
	snap := &cursor.Snapshot{Xmin: c.Snapshot.Xmin, Xmax: max(c.Snapshot.Xmin, c.TransactionID+1)}
	for _, x := range p.ids {
		if uint64(x) <= c.TransactionID {
			snap.Xip = append(snap.Xip, uint64(x))
		}
	}
	c.Snapshot = snap
	return c
}
