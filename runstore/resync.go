package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
)

// Resync (contract §4.2, §5.2): "non-contiguous observation or lag > 10s"
// marks the run STALE, its snapshot is rebuilt from the run's events, and the
// projection resumes from the rebuilt snapshot.
//
//   - A non-contiguous observation: the tail delivered an event that does not
//     extend its run's snapshot by one (RunSnapshot.observe: a gap, or an
//     event in one of the snapshot's Gaps, filled later). This store assigns
//     runSeq = last+1 under the run's lock and never shows one in normal
//     operation; a backend without locks may (seed 002), and an event of the
//     run written around the append authority would.
//   - Lag: a committed run event older than Config.ResyncLag that its run's
//     snapshot does not hold (the projector was stopped, or behind).
//
// The batch that finds either marks the run (run_snapshots.stale_since,
// stale_reason) in its transaction; the resync, in a transaction of its own
// under the projector's lock, replays the run's events in runSeq order
// (RunSnapshot.fold, the same as ProjectSnapshot), writes the snapshot and
// clears the mark. A resync that fails leaves the mark, and the next batch
// tries again; a STALE run's snapshot is not advanced incrementally
// meanwhile.

// StaleRun is a run marked STALE: its snapshot is being rebuilt.
type StaleRun struct {
	RunID string
	// Since is when the run was marked.
	Since time.Time
	// Reason is what triggered it: "gap" or "fill" (a non-contiguous
	// observation, see observation) or "lag".
	Reason string
}

// Reasons of StaleRun.
const (
	staleGap  = "gap"
	staleFill = "fill"
	staleLag  = "lag"
)

// resyncRuns bounds the runs a batch marks STALE for lag, and resyncs.
const resyncRuns = 100

// StaleRuns lists the runs marked STALE, oldest first (at most 100). Empty
// when every snapshot is current.
func (s *Store) StaleRuns(ctx context.Context) ([]StaleRun, error) {
	return s.proj.staleRuns(ctx, s.es.Pool())
}

func (p *projector) staleRuns(ctx context.Context, db querier) ([]StaleRun, error) {
	rows, err := db.Query(ctx, p.s.sql.staleRuns, resyncRuns)
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: stale runs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (StaleRun, error) {
		var (
			sr     StaleRun
			reason *string
		)
		err := r.Scan(&sr.RunID, &sr.Since, &reason)
		if reason != nil {
			sr.Reason = *reason
		}
		return sr, err
	})
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: stale runs: %w", err)
	}
	return out, nil
}

// lagCheckDue says whether the batch looks for runs behind by more than
// ResyncLag: at most twice per ResyncLag, and at most once a second (the
// query reads the run events past the checkpoint).
func (p *projector) lagCheckDue() bool {
	every := min(p.s.cfg.ResyncLag/2, time.Second)
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); now.Sub(p.lagCheckAt) >= every {
		p.lagCheckAt = now
		return true
	}
	return false
}

// markLagging marks STALE the runs holding a committed run event past the
// checkpoint, older than ResyncLag, that their snapshot does not hold.
func (p *projector) markLagging(ctx context.Context, tx pgx.Tx, checkpoint cursor.Cursor) error {
	s := p.s
	rows, err := tx.Query(ctx, s.sql.lagging, checkpoint.TransactionID, checkpoint.Position,
		s.cfg.ResyncLag.Seconds(), resyncRuns)
	if err != nil {
		return errfmt.Errorf("pgdcb: runstore: projector lagging runs: %w", err)
	}
	runs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return errfmt.Errorf("pgdcb: runstore: projector lagging runs: %w", err)
	}
	b := &pgx.Batch{}
	for _, id := range runs {
		// A run the projector has not seen yet gets its row first.
		b.Queue(s.sql.insertPending, id, statusPending, mustJSON(newSnapshot(id)))
		b.Queue(s.sql.markStale, id, staleLag)
		s.log.WarnContext(ctx, "runstore: run STALE", "run", id, "reason", staleLag)
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return errfmt.Errorf("pgdcb: runstore: projector mark lagging runs: %w", err)
	}
	return nil
}

// resync rebuilds the STALE runs' snapshots from their events, one
// transaction under the projector's lock, and clears their marks.
func (p *projector) resync(ctx context.Context, runs []StaleRun) error {
	s := p.s
	if p.beforeResync != nil {
		p.beforeResync(runs)
	}
	err := pgx.BeginTxFunc(ctx, s.es.Pool(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.projectorLock, s.es.Schema(), s.cfg.ProjectorName); err != nil {
			return err
		}
		for _, r := range runs {
			snap, err := s.replay(ctx, tx, r.RunID)
			if err != nil {
				return err
			}
			if snap.LastEventSeq == 0 {
				// No event left (retention deleted the run meanwhile).
				if _, err := tx.Exec(ctx, s.sql.deleteSnapshot, r.RunID); err != nil {
					return err
				}
				continue
			}
			data, err := json.Marshal(snap)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql.upsertSnapshot, r.RunID, snap.Status, snap.LastEventSeq, data,
				timeOrNil(snap.StartedAt), timeOrNil(snap.CompletedAt)); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, s.sql.clearStale, r.RunID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrCorruptEvent) {
			return err
		}
		return errfmt.Errorf("pgdcb: runstore: projector resync: %w", err)
	}
	for _, r := range runs {
		if t := s.projectorTracer(); t != nil {
			t.TraceResync(ctx, r.RunID, r.Reason)
		}
		s.log.InfoContext(ctx, "runstore: run resynced", "run", r.RunID, "reason", r.Reason)
	}
	return nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // a RunSnapshot always encodes
	}
	return b
}

// StaleRunCount counts the runs marked STALE (StaleRuns lists them), for
// metrics read at scrape time.
func (s *Store) StaleRunCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.es.Pool().QueryRow(ctx, s.sql.countStale).Scan(&n); err != nil {
		return 0, errfmt.Errorf("pgdcb: runstore: count stale runs: %w", err)
	}
	return n, nil
}
