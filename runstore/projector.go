package runstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// projector keeps run_snapshots current. It is a projection (package
// projection) over the run events: a projection.Runner named
// Config.ProjectorName tails the events carrying runstore's metadata marker
// with eventstore's tail read (eventstore.TailOptions.MetadataContains), so
// the horizon and cursor rules, the leader election, the checkpoint, the
// backoff after a failed batch, the FAILED state and Pause/Resume are
// projection's. Its handler folds each run event into its run's snapshot
// with the store's Reducer (RunSnapshot.observe) in the batch's transaction,
// which also moves the checkpoint: exactly-once effect. Beyond a held horizon
// it applies the run events that extend their runs contiguously (see
// projectorHandler.HandleBatch). Several instances may run; one leads.
type projector struct {
	s *Store
	r *projection.Runner

	mu sync.Mutex
	// ahead is where the last pass beyond the horizon stopped (a decision
	// cursor, with its snapshot); pending is what the batch in flight
	// found, taken over once it commits.
	ahead   *cursor.Cursor
	pending batchOutcome
	// lagCheckAt is when a batch last looked for runs behind by more than
	// Config.ResyncLag (resync.go); lagAt when Run last measured the lag.
	lagCheckAt, lagAt time.Time

	// beforeResync, when set (tests), runs before a resync with the runs it
	// rebuilds, while they are marked STALE.
	beforeResync func([]StaleRun)
}

// batchOutcome is what a batch's handler found, for after its commit.
type batchOutcome struct {
	n     int
	ahead *cursor.Cursor
	stale []StaleRun
}

// Lag is the projector's distance behind the log.
type Lag struct {
	// Lag is the age of the oldest committed run event that its run's
	// snapshot does not hold yet (0 when caught up).
	Lag time.Duration
	// Alert is Lag > LagAlertThreshold (the contract's PROJECTOR_LAG_HIGH).
	Alert bool
}

func newProjector(s *Store) (*projector, error) {
	p := &projector{s: s}
	var pc projection.Config
	if s.cfg.Projection != nil {
		pc.ReaderConfig = *s.cfg.Projection
	}
	pc.BatchSize = s.cfg.ProjectorBatch
	pc.PollInterval = s.cfg.PollInterval
	pc.MetadataContains = json.RawMessage(marker)
	pc.Reset = func(ctx context.Context, tx pgx.Tx) error {
		// The pass beyond the horizon starts again from the tail.
		p.mu.Lock()
		p.ahead = nil
		p.mu.Unlock()
		_, err := tx.Exec(ctx, s.sql.deleteSnapshots)
		return err
	}
	pc.Logger = s.log
	r, err := projection.NewBatchRunner(s.es, s.cfg.ProjectorName, query.All(), (*projectorHandler)(p), &pc)
	if err != nil {
		return nil, err
	}
	p.r = r
	return p, nil
}

// CatchUp's polling while what it waits for is not reflected yet: from
// catchUpPollMin, doubling, up to catchUpPollMax, back to the minimum after
// progress.
const (
	catchUpPollMin = 2 * time.Millisecond
	catchUpPollMax = 50 * time.Millisecond
)

// catchUp is Store.CatchUp.
func (p *projector) catchUp(ctx context.Context) error {
	// fail returns ctx's error when ctx ended (a statement it interrupted
	// fails with an error of its own), else err.
	fail := func(err error) error {
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		return err
	}
	var snap string
	if err := p.s.es.Pool().QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&snap); err != nil {
		return fail(errfmt.Errorf("pgdcb: runstore: catch up: %w", err))
	}
	var (
		// from: every run event up to it committed before the call is
		// reflected (the checkpoint, or just before the first event the
		// last check found missing), so that a check reads each reflected
		// event once. at: the checkpoint last seen.
		from, at cursor.Cursor
		// standingBy: when a step last found another instance leading;
		// CatchUp stands for election again after DefaultElectionInterval.
		standingBy time.Time
		poll       = catchUpPollMin
	)
	for {
		led, progressed := false, false
		var (
			cp    cursor.Cursor
			state projection.State
			last  string
		)
		if standingBy.IsZero() || time.Since(standingBy) >= projection.DefaultElectionInterval {
			st, err := p.r.Step(ctx)
			if err != nil {
				return fail(err)
			}
			led = st.Led
			if led {
				standingBy = time.Time{}
				state, cp = st.State, st.Batch.Cursor
				progressed = st.Events > 0
				if state == projection.Active && st.Events == p.s.cfg.ProjectorBatch {
					continue // a full page: more below the horizon
				}
			} else {
				standingBy = time.Now()
			}
		}
		if !led {
			// Another instance leads: its checkpoint bounds the check.
			st, err := p.r.Status(ctx)
			switch {
			case errors.Is(err, projection.ErrNotFound):
				state = projection.Active
			case err != nil:
				return fail(errfmt.Errorf("pgdcb: runstore: catch up: %w", err))
			default:
				state, cp, last = st.State, st.Cursor, st.LastError
			}
		}
		if state != projection.Active {
			return errfmt.Errorf("pgdcb: runstore: catch up: %w: the snapshot projector %q is %s (last error: %q)",
				projection.ErrNotActive, p.r.Name(), state, last)
		}
		if before(cp, at) {
			from = cursor.Cursor{} // the checkpoint went back (a Reset): check everything again
		}
		at = cp
		if before(from, cp) {
			from = cp
		}
		missing, err := p.unreflected(ctx, snap, from)
		if err != nil {
			return fail(err)
		}
		if missing == nil {
			_, _ = p.lag(ctx)
			return nil
		}
		if before(from, *missing) {
			progressed = true
			from = *missing
		}
		if progressed {
			poll = catchUpPollMin
			continue
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, catchUpPollMax)
	}
}

// unreflected returns the log point just before the first run event after
// from, committed in the snapshot snap, that its run's snapshot does not
// hold yet; nil when there is none.
func (p *projector) unreflected(ctx context.Context, snap string, from cursor.Cursor) (*cursor.Cursor, error) {
	var c cursor.Cursor
	err := p.s.es.Pool().QueryRow(ctx, p.s.sql.unreflected, from.TransactionID, from.Position, snap).
		Scan(&c.TransactionID, &c.Position)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, errfmt.Errorf("pgdcb: runstore: catch up: %w", err)
	}
	c.Position-- // the check reads after from: keep the event itself in
	return &c, nil
}

// before reports whether a's log point sorts before b's.
func before(a, b cursor.Cursor) bool {
	return cursor.Compare(a.TransactionID, a.Position, b.TransactionID, b.Position) < 0
}

// lag measures the projector's lag (the age of the oldest committed run
// event that its run's snapshot does not hold yet) and reports it to the
// Config.Tracer's ProjectorTracer, if any.
func (p *projector) lag(ctx context.Context) (Lag, error) {
	s := p.s
	var after cursor.Cursor
	st, err := p.r.Status(ctx)
	switch {
	case errors.Is(err, projection.ErrNotFound):
	case err != nil:
		return Lag{}, errfmt.Errorf("pgdcb: runstore: projector lag: %w", err)
	default:
		after = st.Cursor
	}
	var oldest, now time.Time
	err = s.es.Pool().QueryRow(ctx, s.sql.lag, after.TransactionID, after.Position).Scan(&oldest, &now)
	var l Lag
	switch {
	case errors.Is(err, pgx.ErrNoRows):
	case err != nil:
		return Lag{}, errfmt.Errorf("pgdcb: runstore: projector lag: %w", err)
	default:
		l.Lag = max(now.Sub(oldest), 0)
	}
	l.Alert = l.Lag > LagAlertThreshold
	if t := s.projectorTracer(); t != nil {
		t.TraceSnapshotLag(ctx, l)
	}
	return l, nil
}

// SnapshotLag measures the snapshot projector's lag: the age of the oldest
// committed run event that its run's snapshot does not hold yet. It reports
// it to the Config.Tracer's ProjectorTracer, if any.
func (s *Store) SnapshotLag(ctx context.Context) (Lag, error) { return s.proj.lag(ctx) }

// projectorHandler is the projector's projection.BatchHandler.
type projectorHandler projector

// BeforeRead takes the projector's lock in the batch's transaction before
// the tail is read (projection.BeforeReader): it serialises the batch with
// DeleteRun (and other projector instances) without giving the transaction
// an xid, so the page never holds the events of a run whose DeleteRun
// committed before it was read, and a DeleteRun that comes later waits for
// the batch and deletes the snapshot the batch wrote. On a standby the
// runner reads the page once the standby replayed the primary's WAL as of
// the lock.
func (h *projectorHandler) BeforeRead(ctx context.Context, tx pgx.Tx) error {
	s := h.s
	if _, err := tx.Exec(ctx, s.sql.projectorLock, s.es.Schema(), s.cfg.ProjectorName); err != nil {
		return errfmt.Errorf("pgdcb: runstore: projector lock: %w", err)
	}
	return nil
}

// HandleBatch folds the page's run events into their snapshots, in the
// batch's transaction. Committed events beyond the horizon (an open
// transaction of this database holds the tail back): a run's events commit
// in runSeq order (runSeq is assigned under the run's lock), so an event
// that extends its run's snapshot contiguously is applied now; the
// checkpoint stays at the horizon, so nothing is skipped, and observe
// ignores what a snapshot already holds when the tail reaches it.
func (h *projectorHandler) HandleBatch(ctx context.Context, tx pgx.Tx, b pgdcb.TailBatch) error {
	p := (*projector)(h)
	s := p.s
	p.mu.Lock()
	p.pending = batchOutcome{}
	p.mu.Unlock()
	rows, err := decodeRows(b.Events)
	if err != nil {
		return err
	}
	if err := p.apply(ctx, tx, rows, false); err != nil {
		return err
	}
	full := len(b.Events) == s.cfg.ProjectorBatch
	held := !full && b.Horizon > 0 && b.Head.TransactionID >= b.Horizon
	var next *cursor.Cursor
	if held {
		if next, err = p.applyAhead(ctx, tx, b.Cursor); err != nil {
			return err
		}
	}
	if (full || held) && p.lagCheckDue() {
		if err := p.markLagging(ctx, tx, b.Cursor); err != nil {
			return err
		}
	}
	stale, err := p.staleRuns(ctx, tx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.pending = batchOutcome{n: len(b.Events), ahead: next, stale: stale}
	p.mu.Unlock()
	return nil
}

// AfterCommit takes over the committed batch's pass beyond the horizon,
// rebuilds the runs found STALE and, at most once a second, measures the lag.
func (h *projectorHandler) AfterCommit(ctx context.Context, _ pgdcb.TailBatch) error {
	p := (*projector)(h)
	p.mu.Lock()
	out := p.pending
	p.pending = batchOutcome{}
	p.ahead = out.ahead
	lagDue := time.Since(p.lagAt) >= time.Second
	if lagDue {
		p.lagAt = time.Now()
	}
	p.mu.Unlock()
	if t := p.s.projectorTracer(); t != nil {
		t.TraceProjected(ctx, out.n, false)
	}
	if len(out.stale) > 0 {
		if err := p.resync(ctx, out.stale); err != nil {
			return err
		}
	}
	if lagDue {
		// At most once a second: with the horizon held the measurement
		// reads the run events past the checkpoint.
		if _, err := p.lag(ctx); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// runRow is a run event with its place in the log.
type runRow struct {
	tx  uint64
	pos int64
	ev  CanonicalEngineEvent
}

// decodeRows decodes run events read from the log.
func decodeRows(evs []pgdcb.StoredEvent) ([]runRow, error) {
	rows := make([]runRow, len(evs))
	for i, e := range evs {
		ev, err := decodeEvent(e.Data, e.OccurredAt)
		if err != nil {
			return nil, fmt.Errorf("event at %d: %w", e.Position, err)
		}
		rows[i] = runRow{tx: e.TransactionID, pos: e.Position, ev: ev}
	}
	return rows, nil
}

// applyAhead applies the committed run events after the tail's cursor that
// extend their runs' snapshots contiguously, reading on from where the last
// such pass stopped (a forward eventstore read with that decision cursor,
// narrowed to run events). It returns where this one stopped.
func (p *projector) applyAhead(ctx context.Context, tx pgx.Tx, tail cursor.Cursor) (*cursor.Cursor, error) {
	p.mu.Lock()
	from := tail
	if a := p.ahead; a != nil && cursor.Compare(a.TransactionID, a.Position, tail.TransactionID, tail.Position) > 0 {
		from = *a // with its snapshot: its in-progress transactions are read again
	}
	p.mu.Unlock()
	evs, next, err := p.s.es.ReadAllTx(ctx, tx, query.All(), &pgdcb.ReadOptions{
		After: &from, Limit: p.s.cfg.ProjectorBatch, MetadataContains: json.RawMessage(marker)})
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: runstore: projector read beyond the horizon: %w", err)
	}
	rows, err := decodeRows(evs)
	if err != nil {
		return nil, err
	}
	if err := p.apply(ctx, tx, rows, true); err != nil {
		return nil, err
	}
	if t := p.s.projectorTracer(); t != nil {
		t.TraceProjected(ctx, len(rows), true)
	}
	return &next, nil
}

// apply folds run events, grouped by run in log (= runSeq) order, into their
// snapshots (RunSnapshot.observe). ahead: the events are beyond the horizon,
// where a run's next event may still be in a transaction the read saw in
// progress; a run stops at its first non-contiguous event and the tail
// brings the rest. Otherwise (the tail: every earlier transaction has ended)
// a non-contiguous observation marks the run STALE for a resync.
func (p *projector) apply(ctx context.Context, tx pgx.Tx, rows []runRow, ahead bool) error {
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
			snap = newSnapshot(id)
		}
		changed, reason := false, ""
		for _, ev := range byRun[id] {
			obs := snap.observe(ev, s.cfg.Reducer)
			if obs == observedNext {
				changed = true
				continue
			}
			if obs == observedHeld {
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
				return errfmt.Errorf("pgdcb: runstore: projector encode snapshot: %w", err)
			}
			b.Queue(s.sql.upsertSnapshot, id, snap.Status, snap.LastEventSeq, data,
				timeOrNil(snap.StartedAt), timeOrNil(snap.CompletedAt))
		}
		if reason != "" {
			b.Queue(s.sql.markStale, id, reason)
			s.log.WarnContext(ctx, "runstore: run STALE", "run", id, "reason", reason, "last_event_seq", snap.LastEventSeq)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return errfmt.Errorf("pgdcb: runstore: projector upsert snapshots: %w", err)
	}
	return nil
}

func (p *projector) loadSnapshots(ctx context.Context, tx pgx.Tx, runs []string) (map[string]*RunSnapshot, map[string]bool, error) {
	snaps := make(map[string]*RunSnapshot, len(runs))
	stale := map[string]bool{}
	rows, err := tx.Query(ctx, p.s.sql.loadSnapshots, runs)
	if err != nil {
		return nil, nil, errfmt.Errorf("pgdcb: runstore: projector load snapshots: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id      string
			data    []byte
			isStale bool
		)
		if err := rows.Scan(&id, &data, &isStale); err != nil {
			return nil, nil, errfmt.Errorf("pgdcb: runstore: projector load snapshots: %w", err)
		}
		var snap RunSnapshot
		if err := json.Unmarshal(data, &snap); err != nil {
			return nil, nil, fmt.Errorf("%w: snapshot of %q: %v", ErrCorruptEvent, id, err)
		}
		snaps[id] = &snap
		stale[id] = isStale
	}
	if err := rows.Err(); err != nil {
		return nil, nil, errfmt.Errorf("pgdcb: runstore: projector load snapshots: %w", err)
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
