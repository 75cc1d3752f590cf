package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
)

// SnapshotProjector keeps run_snapshots current: it tails the run events of
// the log below the horizon, as eventstore.ReadTail does (so no
// late-committing event is skipped), folds each into its run's snapshot with
// the store's Reducer (RunSnapshot.Observe), and
// upserts the snapshots in the same transaction as its checkpoint (row
// Config.ProjectorName of the checkpoints table): exactly-once effect.
// Several instances may run; they take turns on an advisory lock.
type SnapshotProjector struct {
	s *Store

	// ahead is where the last pass beyond the horizon stopped (a decision
	// cursor, with its snapshot); see processBatch.
	aheadMu sync.Mutex
	ahead   *cursor.Cursor
	// lagCheckAt is when a batch last looked for runs behind by more than
	// Config.ResyncLag (resync.go).
	lagCheckAt time.Time

	// beforeResync, when set (tests), runs before a resync with the runs it
	// rebuilds, while they are marked STALE.
	beforeResync func([]StaleRun)
}

// Lag is the projector's distance behind the log.
type Lag struct {
	// Lag is the age of the oldest committed run event that its run's
	// snapshot does not hold yet (0 when caught up).
	Lag time.Duration
	// Alert is Lag > LagAlertThreshold (the contract's PROJECTOR_LAG_HIGH).
	Alert bool
}

// Run projects until ctx ends: a batch after each NOTIFY of an append (or each
// PollInterval without one). It returns ctx's error, or the first error of a
// batch (the checkpoint is left where the last good batch put it).
func (p *SnapshotProjector) Run(ctx context.Context) error {
	conn, err := p.s.es.Pool().Acquire(ctx)
	if err != nil {
		return fmt.Errorf("runstore: projector: %w", err)
	}
	defer conn.Release()
	// Registered as a listener (appends notify only then), LISTENing; the
	// first batch below reads what committed before.
	if err := eventstore.ListenConn(ctx, conn.Conn(), p.s.es.Schema()); err != nil {
		return fmt.Errorf("runstore: projector: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it and
		// release the registration; if that fails, close it instead.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := eventstore.UnlistenConn(uctx, conn.Conn(), p.s.es.Schema()); err != nil {
			_ = conn.Conn().Close(uctx)
		}
	}()
	var lagAt time.Time
	// Appends that committed while their store still trusted an older "no
	// listener" answer sent no NOTIFY: read once more at this point.
	settleAt := time.Now().Add(eventstore.ListenerSettle)
	for {
		n, err := p.ProcessBatch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		if time.Since(lagAt) >= time.Second {
			// Measured at most once a second: with the horizon held the
			// measurement reads the events past the checkpoint.
			lagAt = time.Now()
			if _, err := p.Lag(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		if n == p.s.cfg.ProjectorBatch {
			continue // more to read
		}
		wait := p.s.cfg.PollInterval
		if until := time.Until(settleAt); until > 0 && until < wait {
			wait = until
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, err = conn.Conn().WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("runstore: projector: wait: %w", err)
		}
	}
}

// ProcessBatch projects one batch of up to Config.ProjectorBatch run events
// (the projector reads nothing else of the log) and returns how many it read
// below the horizon. Runs it finds STALE (a non-contiguous observation, or
// events older than Config.ResyncLag their snapshot does not hold) are
// rebuilt from their events in the same call.
func (p *SnapshotProjector) ProcessBatch(ctx context.Context) (int, error) {
	n, _, err := p.processBatch(ctx)
	return n, err
}

func (p *SnapshotProjector) processBatch(ctx context.Context) (int, runPage, error) {
	n, page, stale, err := p.project(ctx)
	if err != nil {
		return 0, page, err
	}
	if len(stale) > 0 {
		if err := p.resync(ctx, stale); err != nil {
			return 0, page, err
		}
	}
	return n, page, nil
}

// project is a batch's transaction: the tail, the pass beyond a held horizon,
// the lag trigger. It returns the STALE runs to resync.
func (p *SnapshotProjector) project(ctx context.Context) (int, runPage, []StaleRun, error) {
	s := p.s
	tx, err := s.es.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, runPage{}, nil, fmt.Errorf("runstore: projector: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, s.sql.projectorLock, s.es.Schema(), s.cfg.ProjectorName); err != nil {
		return 0, runPage{}, nil, fmt.Errorf("runstore: projector lock: %w", err)
	}
	after, err := p.checkpoint(ctx, tx)
	if err != nil {
		return 0, runPage{}, nil, err
	}
	// Read before the transaction's first write (it has no xid yet, so it does
	// not hold the horizon back itself).
	page, err := s.readRunTail(ctx, tx, after, s.cfg.ProjectorBatch)
	if err != nil {
		return 0, runPage{}, nil, err
	}
	// Committed events beyond the horizon: an open transaction of this
	// database holds the tail back. A run's events commit in runSeq order
	// (runSeq is assigned under the run's lock), so an event that extends its
	// run's snapshot contiguously can be applied now; the checkpoint stays
	// at the horizon, so nothing is skipped, and Observe ignores what a
	// snapshot already holds when the tail reaches it.
	full := len(page.rows) == s.cfg.ProjectorBatch
	held := !full && page.horizon > 0 && page.head.TransactionID >= page.horizon
	if page.cursor == after && !held {
		stale, err := p.staleRuns(ctx, tx)
		return 0, page, stale, err // nothing new
	}
	if page.cursor != after {
		if err := p.apply(ctx, tx, page.rows, false); err != nil {
			return 0, page, nil, err
		}
		if _, err := tx.Exec(ctx, s.sql.saveCheckpoint, s.cfg.ProjectorName, page.cursor.TransactionID, page.cursor.Position); err != nil {
			return 0, page, nil, fmt.Errorf("runstore: projector checkpoint: %w", err)
		}
	}
	var next *cursor.Cursor
	if held {
		if next, err = p.applyAhead(ctx, tx, page.cursor); err != nil {
			return 0, page, nil, err
		}
	}
	if (full || held) && p.lagCheckDue() {
		if err := p.markLagging(ctx, tx, page.cursor); err != nil {
			return 0, page, nil, err
		}
	}
	stale, err := p.staleRuns(ctx, tx)
	if err != nil {
		return 0, page, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, page, nil, fmt.Errorf("runstore: projector commit: %w", err)
	}
	p.aheadMu.Lock()
	p.ahead = next
	p.aheadMu.Unlock()
	s.metrics.projected.Add(float64(len(page.rows)))
	return len(page.rows), page, stale, nil
}

// applyAhead applies the committed run events after the tail's cursor that
// extend their runs' snapshots contiguously, reading on from where the last
// such pass stopped. It returns where this one stopped.
func (p *SnapshotProjector) applyAhead(ctx context.Context, tx pgx.Tx, tail cursor.Cursor) (*cursor.Cursor, error) {
	p.aheadMu.Lock()
	from := tail
	if a := p.ahead; a != nil && cursor.Compare(a.TransactionID, a.Position, tail.TransactionID, tail.Position) > 0 {
		from = *a // with its snapshot: its in-progress transactions are read again
	}
	p.aheadMu.Unlock()
	page, err := p.s.readRunAhead(ctx, tx, from, p.s.cfg.ProjectorBatch)
	if err != nil {
		return nil, err
	}
	if err := p.apply(ctx, tx, page.rows, true); err != nil {
		return nil, err
	}
	p.s.metrics.ahead.Add(float64(len(page.rows)))
	return &page.cursor, nil
}

// apply folds run events, grouped by run in log (= runSeq) order, into their
// snapshots (RunSnapshot.Observe). ahead: the events are beyond the horizon,
// where a run's next event may still be in a transaction the read saw in
// progress; a run stops at its first non-contiguous event and the tail
// brings the rest. Otherwise (the tail: every earlier transaction has ended)
// a non-contiguous observation marks the run STALE for a resync.
func (p *SnapshotProjector) apply(ctx context.Context, tx pgx.Tx, rows []runRow, ahead bool) error {
	byRun := map[string][]CanonicalEngineEvent{}
	var runs []string
	for _, r := range rows {
		id := r.ev.RunID
		if _, ok := byRun[id]; !ok {
			runs = append(runs, id)
		}
		byRun[id] = append(byRun[id], r.ev)
	}
	if len(runs) == 0 {
		return nil
	}
	s := p.s
	snaps, stale, err := p.loadSnapshots(ctx, tx, runs)
	if err != nil {
		return err
	}
	b := &pgx.Batch{}
	for _, id := range runs {
		if stale[id] {
			continue // a resync rebuilds it from its events
		}
		snap, known := snaps[id]
		if !known {
			snap = NewSnapshot(id)
		}
		changed, reason := false, ""
		for _, ev := range byRun[id] {
			obs := snap.Observe(ev, s.cfg.Reducer)
			if obs == ObservedNext {
				changed = true
				continue
			}
			if obs == ObservedHeld {
				continue
			}
			if !ahead {
				reason = obs.String()
			}
			break
		}
		if changed || (reason != "" && !known) {
			data, err := json.Marshal(snap)
			if err != nil {
				return fmt.Errorf("runstore: projector encode snapshot: %w", err)
			}
			b.Queue(s.sql.upsertSnapshot, id, snap.Status, snap.LastEventSeq, data,
				timeOrNil(snap.StartedAt), timeOrNil(snap.CompletedAt))
		}
		if reason != "" {
			b.Queue(s.sql.markStale, id, reason)
			s.log.WarnContext(ctx, "runstore: run STALE", "run", id, "reason", reason, "lastEventSeq", snap.LastEventSeq)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("runstore: projector upsert snapshots: %w", err)
	}
	return nil
}

func (p *SnapshotProjector) loadSnapshots(ctx context.Context, tx pgx.Tx, runs []string) (map[string]*RunSnapshot, map[string]bool, error) {
	snaps := make(map[string]*RunSnapshot, len(runs))
	stale := map[string]bool{}
	rows, err := tx.Query(ctx, p.s.sql.loadSnapshots, runs)
	if err != nil {
		return nil, nil, fmt.Errorf("runstore: projector load snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id      string
			data    []byte
			isStale bool
		)
		if err := rows.Scan(&id, &data, &isStale); err != nil {
			return nil, nil, fmt.Errorf("runstore: projector load snapshots: %w", err)
		}
		var snap RunSnapshot
		if err := json.Unmarshal(data, &snap); err != nil {
			return nil, nil, fmt.Errorf("%w: snapshot of %q: %v", ErrCorruptEvent, id, err)
		}
		snaps[id] = &snap
		stale[id] = isStale
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("runstore: projector load snapshots: %w", err)
	}
	return snaps, stale, nil
}

func timeOrNil(s string) any {
	if s == "" {
		return nil
	}
	t, err := parseTime(s)
	if err != nil {
		return nil
	}
	return t
}

func (p *SnapshotProjector) checkpoint(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (cursor.Cursor, error) {
	var (
		c      cursor.Cursor
		status string
	)
	err := db.QueryRow(ctx, p.s.sql.checkpoint, p.s.cfg.ProjectorName).Scan(&c.TransactionID, &c.Position, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return cursor.Start, nil
	}
	if err != nil {
		return cursor.Cursor{}, fmt.Errorf("runstore: projector checkpoint: %w", err)
	}
	return c, nil
}

// CatchUp projects until every event committed before the call is projected.
// It waits (polling) while an older transaction of the store's database still
// runs (the tailing horizon; transactions of other databases do not hold it),
// and returns ctx's error if that lasts longer than ctx.
func (p *SnapshotProjector) CatchUp(ctx context.Context) error {
	head, err := p.s.es.Head(ctx)
	if err != nil {
		return fmt.Errorf("runstore: catch up: %w", err)
	}
	for {
		_, page, err := p.processBatch(ctx)
		if err != nil {
			return err
		}
		cur := page.cursor
		if cursor.Compare(cur.TransactionID, cur.Position, head.TransactionID, head.Position) >= 0 {
			_, _ = p.Lag(ctx)
			return nil
		}
		if len(page.rows) == 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// Lag measures the projector's lag (the age of the oldest committed run
// event that its run's snapshot does not hold yet) and updates its gauges.
func (p *SnapshotProjector) Lag(ctx context.Context) (Lag, error) {
	s := p.s
	after, err := p.checkpoint(ctx, s.es.Pool())
	if err != nil {
		return Lag{}, err
	}
	var oldest, now time.Time
	err = s.es.Pool().QueryRow(ctx, s.sql.lag, after.TransactionID, after.Position).Scan(&oldest, &now)
	var l Lag
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return Lag{}, fmt.Errorf("runstore: projector lag: %w", err)
	default:
		l.Lag = max(now.Sub(oldest), 0)
	}
	l.Alert = l.Lag > LagAlertThreshold
	s.metrics.setLag(l)
	return l, nil
}

// SnapshotLag is the snapshot projector's lag (see SnapshotProjector.Lag).
func (s *Store) SnapshotLag(ctx context.Context) (Lag, error) { return s.proj.Lag(ctx) }
