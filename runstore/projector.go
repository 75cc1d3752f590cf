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
	"github.com/pgdcb/pgdcb/query"
)

// SnapshotProjector keeps run_snapshots current: it tails the log with
// eventstore.ReadTailTx (so no late-committing event is skipped), folds each
// runstore event into its run's snapshot with the store's Reducer, and
// upserts the snapshots in the same transaction as its checkpoint (row
// Config.ProjectorName of the checkpoints table): exactly-once effect.
// Several instances may run; they take turns on an advisory lock.
type SnapshotProjector struct {
	s *Store

	// ahead is where the last pass beyond the horizon stopped (a decision
	// cursor, with its snapshot); see processBatch.
	aheadMu sync.Mutex
	ahead   *cursor.Cursor
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
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{eventstore.NotifyChannel(p.s.es.Schema())}.Sanitize()); err != nil {
		return fmt.Errorf("runstore: projector: listen: %w", err)
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
	}()
	var lagAt time.Time
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
		wctx, cancel := context.WithTimeout(ctx, p.s.cfg.PollInterval)
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

// ProcessBatch projects one batch of up to Config.ProjectorBatch log events
// (of any kind; runstore events are applied) and returns how many log events
// it read.
func (p *SnapshotProjector) ProcessBatch(ctx context.Context) (int, error) {
	n, _, err := p.processBatch(ctx)
	return n, err
}

func (p *SnapshotProjector) processBatch(ctx context.Context) (int, eventstore.TailBatch, error) {
	s := p.s
	tx, err := s.es.Pool().BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, eventstore.TailBatch{}, fmt.Errorf("runstore: projector: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, s.sql.projectorLock, s.es.Schema(), s.cfg.ProjectorName); err != nil {
		return 0, eventstore.TailBatch{}, fmt.Errorf("runstore: projector lock: %w", err)
	}
	after, err := p.checkpoint(ctx, tx)
	if err != nil {
		return 0, eventstore.TailBatch{}, err
	}
	// Read before the transaction's first write (it has no xid yet, so it does
	// not hold the horizon back itself).
	batch, err := s.es.ReadTailTx(ctx, tx, query.All(), after, s.cfg.ProjectorBatch)
	if err != nil {
		return 0, eventstore.TailBatch{}, fmt.Errorf("runstore: projector read: %w", err)
	}
	// Committed events beyond the horizon: an open transaction somewhere in
	// the cluster holds the tail back. A run's events commit in runSeq order
	// (runSeq is assigned under the run's lock), so an event that extends its
	// run's snapshot contiguously can be applied now; the checkpoint stays
	// at the horizon, so nothing is skipped, and apply ignores what a
	// snapshot already holds when the tail reaches it.
	held := len(batch.Events) < s.cfg.ProjectorBatch && batch.Horizon > 0 &&
		batch.Head.TransactionID >= batch.Horizon
	if batch.Cursor == after && !held {
		return 0, batch, nil // nothing new
	}
	if batch.Cursor != after {
		if err := p.apply(ctx, tx, batch.Events, false); err != nil {
			return 0, batch, err
		}
		if _, err := tx.Exec(ctx, s.sql.saveCheckpoint, s.cfg.ProjectorName, batch.Cursor.TransactionID, batch.Cursor.Position); err != nil {
			return 0, batch, fmt.Errorf("runstore: projector checkpoint: %w", err)
		}
	}
	var next *cursor.Cursor
	if held {
		if next, err = p.applyAhead(ctx, tx, batch.Cursor); err != nil {
			return 0, batch, err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, batch, fmt.Errorf("runstore: projector commit: %w", err)
	}
	p.aheadMu.Lock()
	p.ahead = next
	p.aheadMu.Unlock()
	s.metrics.projected.Add(float64(len(batch.Events)))
	return len(batch.Events), batch, nil
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
	evs, c, err := p.s.es.ReadAllTx(ctx, tx, query.All(), &eventstore.ReadOptions{After: &from, Limit: p.s.cfg.ProjectorBatch})
	if err != nil {
		return nil, fmt.Errorf("runstore: projector read beyond the horizon: %w", err)
	}
	if err := p.apply(ctx, tx, evs, true); err != nil {
		return nil, err
	}
	p.s.metrics.ahead.Add(float64(len(evs)))
	return &c, nil
}

// apply decodes the run events among evs, grouped by run in log (= runSeq)
// order, and folds them into their snapshots. contiguous: apply a run's
// events only while each is the next runSeq of its snapshot.
func (p *SnapshotProjector) apply(ctx context.Context, tx pgx.Tx, evs []eventstore.StoredEvent, contiguous bool) error {
	byRun := map[string][]CanonicalEngineEvent{}
	var runs []string
	for _, se := range evs {
		if !isRunEvent(se) {
			continue
		}
		ev, err := decodeEvent(se.Data, se.OccurredAt)
		if err != nil {
			return fmt.Errorf("runstore: projector: event at %d: %w", se.Position, err)
		}
		if _, ok := byRun[ev.RunID]; !ok {
			runs = append(runs, ev.RunID)
		}
		byRun[ev.RunID] = append(byRun[ev.RunID], ev)
	}
	if len(runs) == 0 {
		return nil
	}
	return p.applyRuns(ctx, tx, runs, byRun, contiguous)
}

func (p *SnapshotProjector) applyRuns(ctx context.Context, tx pgx.Tx, runs []string, byRun map[string][]CanonicalEngineEvent, contiguous bool) error {
	s := p.s
	snaps := make(map[string]*RunSnapshot, len(runs))
	rows, err := tx.Query(ctx, s.sql.loadSnapshots, runs)
	if err != nil {
		return fmt.Errorf("runstore: projector load snapshots: %w", err)
	}
	for rows.Next() {
		var (
			id   string
			data []byte
		)
		if err := rows.Scan(&id, &data); err != nil {
			rows.Close()
			return fmt.Errorf("runstore: projector load snapshots: %w", err)
		}
		var snap RunSnapshot
		if err := json.Unmarshal(data, &snap); err != nil {
			rows.Close()
			return fmt.Errorf("%w: snapshot of %q: %v", ErrCorruptEvent, id, err)
		}
		snaps[id] = &snap
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("runstore: projector load snapshots: %w", err)
	}
	b := &pgx.Batch{}
	for _, id := range runs {
		snap := snaps[id]
		if snap == nil {
			snap = NewSnapshot(id)
		}
		changed := false
		for _, ev := range byRun[id] {
			if contiguous && ev.RunSeq != snap.LastEventSeq+1 {
				if ev.RunSeq <= snap.LastEventSeq {
					continue // already applied
				}
				break // a gap: the tail brings the rest in order
			}
			changed = s.apply(snap, ev) || changed
		}
		if !changed {
			continue
		}
		data, err := json.Marshal(snap)
		if err != nil {
			return fmt.Errorf("runstore: projector encode snapshot: %w", err)
		}
		b.Queue(s.sql.upsertSnapshot, id, snap.Status, snap.LastEventSeq, data,
			timeOrNil(snap.StartedAt), timeOrNil(snap.CompletedAt))
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("runstore: projector upsert snapshots: %w", err)
	}
	return nil
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

func isRunEvent(se eventstore.StoredEvent) bool {
	if len(se.Metadata) == 0 {
		return false
	}
	var m struct {
		Runstore string `json:"runstore"`
	}
	return json.Unmarshal(se.Metadata, &m) == nil && m.Runstore == "v1"
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
// It waits (polling) while an older transaction still runs (the tailing
// horizon), and returns ctx's error if that lasts longer than ctx.
func (p *SnapshotProjector) CatchUp(ctx context.Context) error {
	head, err := p.s.es.Head(ctx)
	if err != nil {
		return fmt.Errorf("runstore: catch up: %w", err)
	}
	for {
		_, batch, err := p.processBatch(ctx)
		if err != nil {
			return err
		}
		cur := batch.Cursor
		if cursor.Compare(cur.TransactionID, cur.Position, head.TransactionID, head.Position) >= 0 {
			_, _ = p.Lag(ctx)
			return nil
		}
		if len(batch.Events) == 0 {
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
