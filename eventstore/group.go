package eventstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
)

// Group commit (on unless Config.GroupCommitDisabled, docs/GROUPCOMMIT.md).
//
// A call that finds the queue empty and fewer than GroupSenders senders at
// work is sent at once by its caller, as without grouping (it holds a
// sender's place meanwhile; if calls queued behind it, a sender goroutine
// takes its place when it is done). Otherwise the call queues, and starts a
// sender goroutine if there are fewer than GroupSenders. A sender acquires a
// pooled connection, then takes everything queued (within the limits, see
// takeGroupLocked) and sends it as one call of append_group (a group of one
// goes through append_events, exactly the path without grouping); it repeats
// until the queue is empty. With one writer every call is sent at once: no
// waiting for company.

// Defaults of the group fields of Config.
const (
	DefaultGroupMaxAppends = 64
	DefaultGroupMaxEvents  = 1000
	DefaultGroupSenders    = 2
)

type groupResult struct {
	res AppendResult
	err error
}

type groupReq struct {
	ctx    context.Context
	events []Event
	cond   *appendif.Condition
	locks  lockSet          // the append's own keys (as append_events would take them)
	size   int              // bytes, as for MaxBatchBytes
	done   chan groupResult // buffered: the sender never blocks
	taken  bool             // under groupCommitter.mu: a sender took it
	queued time.Time        // when it joined the queue
}

func (r *groupReq) finish(res AppendResult, err error) { r.done <- groupResult{res, err} }

type groupCommitter struct {
	mu      sync.Mutex
	queue   []*groupReq
	senders int

	groups     atomic.Int64 // server calls sent for groups of two or more
	grouped    atomic.Int64 // appends in those calls
	alone      atomic.Int64 // groups of one
	retried    atomic.Int64 // members retried alone after a group failed
	maxMembers atomic.Int64

	waited    atomic.Int64                           // appends taken off the queue by a sender
	waitTotal atomic.Int64                           // their time queued, summed (ns)
	waitMax   atomic.Int64                           // the longest (ns)
	waitHist  [len(queueWaitBounds) + 1]atomic.Int64 // by queueWaitBounds
}

// queueWaitBounds are the upper bounds of GroupStats.QueueWaits' buckets.
var queueWaitBounds = [...]time.Duration{
	100 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
}

// WaitBucket is one bucket of GroupStats.QueueWaits.
type WaitBucket struct {
	// Max is the bucket's upper bound (inclusive); the last bucket's is
	// math.MaxInt64 (every longer wait).
	Max time.Duration
	// Count is the number of appends whose time queued was at most Max and
	// more than the previous bucket's Max.
	Count int64
}

// GroupStats counts the group committer's work since the store was created.
type GroupStats struct {
	// Groups is the number of server calls that carried two or more appends;
	// Grouped the appends they carried (Grouped/Groups is the mean group size).
	Groups, Grouped int64
	// Alone is the number of appends sent alone (nothing else was queued).
	Alone int64
	// MaxAppends is the largest group sent.
	MaxAppends int64
	// Retried is the number of appends retried alone because their group's
	// transaction failed with an error.
	Retried int64
	// Queued is the number of appends that waited in the queue before a
	// sender took them (an append sent at once by its caller never queues);
	// QueueWait is their time queued, summed (QueueWait/Queued is the mean),
	// MaxQueueWait the longest. Time queued ends when a sender holding a
	// connection takes the append into a group.
	Queued                  int64
	QueueWait, MaxQueueWait time.Duration
	// QueueWaits is the histogram of the Queued appends' time queued, in
	// fixed buckets: at most 100µs, 500µs, 1ms, 5ms, 10ms, 50ms, 100ms, and
	// longer.
	QueueWaits []WaitBucket
}

// Commits is the number of transactions the group committer sent that
// carried appends (groups, and appends sent alone; retries after a failed
// group not counted).
func (st GroupStats) Commits() int64 { return st.Groups + st.Alone }

// AppendsPerCommit is the mean number of appends per transaction sent
// (Grouped+Alone over Commits); 0 before the first.
func (st GroupStats) AppendsPerCommit() float64 {
	if st.Commits() == 0 {
		return 0
	}
	return float64(st.Grouped+st.Alone) / float64(st.Commits())
}

// Sub returns the counters accumulated since before was taken (MaxAppends
// and MaxQueueWait stay st's: maxima since the store was created).
func (st GroupStats) Sub(before GroupStats) GroupStats {
	d := st
	d.Groups -= before.Groups
	d.Grouped -= before.Grouped
	d.Alone -= before.Alone
	d.Retried -= before.Retried
	d.Queued -= before.Queued
	d.QueueWait -= before.QueueWait
	d.QueueWaits = slices.Clone(st.QueueWaits)
	for i := range d.QueueWaits {
		if i < len(before.QueueWaits) {
			d.QueueWaits[i].Count -= before.QueueWaits[i].Count
		}
	}
	return d
}

// GroupStats returns the group committer's counters (all zero when
// Config.GroupCommitDisabled is set).
func (s *Store) GroupStats() GroupStats {
	g := &s.group
	st := GroupStats{Groups: g.groups.Load(), Grouped: g.grouped.Load(), Alone: g.alone.Load(),
		MaxAppends: g.maxMembers.Load(), Retried: g.retried.Load(),
		Queued: g.waited.Load(), QueueWait: time.Duration(g.waitTotal.Load()), MaxQueueWait: time.Duration(g.waitMax.Load()),
		QueueWaits: make([]WaitBucket, len(g.waitHist))}
	for i := range g.waitHist {
		st.QueueWaits[i] = WaitBucket{Max: time.Duration(math.MaxInt64), Count: g.waitHist[i].Load()}
		if i < len(queueWaitBounds) {
			st.QueueWaits[i].Max = queueWaitBounds[i]
		}
	}
	return st
}

// recordWait counts one append's time queued.
func (g *groupCommitter) recordWait(d time.Duration) {
	g.waited.Add(1)
	g.waitTotal.Add(int64(d))
	storeMax(&g.waitMax, int64(d))
	i := 0
	for i < len(queueWaitBounds) && d > queueWaitBounds[i] {
		i++
	}
	g.waitHist[i].Add(1)
}

// storeMax raises m to v if v is larger.
func storeMax(m *atomic.Int64, v int64) {
	for {
		old := m.Load()
		if v <= old || m.CompareAndSwap(old, v) {
			return
		}
	}
}

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// appendGrouped is appendPool with group commit on (events validated).
func (s *Store) appendGrouped(ctx context.Context, events []Event, cond *appendif.Condition) (AppendResult, error) {
	if err := ctx.Err(); err != nil {
		return AppendResult{}, errf("append", err) // nothing was sent
	}
	g := &s.group
	maxSenders := orDefault(s.cfg.GroupSenders, DefaultGroupSenders)
	g.mu.Lock()
	if len(g.queue) == 0 && g.senders < maxSenders {
		// Nobody to group with and a sender's place free: this call is sent
		// at once, by its caller, on the path without grouping. Calls that
		// arrive meanwhile queue; a sender takes over if any did.
		g.senders++
		g.mu.Unlock()
		g.alone.Add(1)
		res, err := s.appendOne(ctx, events, cond)
		g.mu.Lock()
		if len(g.queue) > 0 {
			go s.groupLoop()
		} else {
			g.senders--
		}
		g.mu.Unlock()
		return res, err
	}
	g.mu.Unlock()
	r := &groupReq{ctx: ctx, events: events, cond: cond, done: make(chan groupResult, 1),
		locks: locksFor(s.cfg.Schema, events, cond, s.cfg.MaxLockKeys)}
	for _, e := range events {
		r.size += e.Size()
	}
	g.mu.Lock()
	r.queued = time.Now()
	g.queue = append(g.queue, r)
	if g.senders < maxSenders {
		g.senders++
		go s.groupLoop()
	}
	g.mu.Unlock()
	select {
	case out := <-r.done:
		return out.res, out.err
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !r.taken {
		if i := slices.Index(g.queue, r); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
		}
		g.mu.Unlock()
		return AppendResult{}, errf("append", ctx.Err()) // nothing was sent
	}
	g.mu.Unlock()
	select {
	case out := <-r.done: // finished meanwhile
		return out.res, out.err
	default:
	}
	// In flight: it may commit.
	return AppendResult{}, &pgdcb.OutcomeUnknownError{Op: "append", Err: ctx.Err()}
}

// appendOne sends one append (events validated) as its own transaction on a
// pooled connection, telling a certain failure from an unknown outcome: the
// path of every call without grouping, and of a group of one.
func (s *Store) appendOne(ctx context.Context, events []Event, cond *appendif.Condition) (AppendResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return AppendResult{}, errf("append: acquire a connection", err) // nothing was sent
	}
	defer conn.Release()
	if err := ctx.Err(); err != nil {
		return AppendResult{}, errf("append", err) // nothing was sent
	}
	res, err := s.appendEvents(ctx, conn, events, cond, true)
	if err == nil {
		s.Notify(ctx)
	}
	return res, err
}

// groupLoop is a sender: whenever it has a connection, it takes everything
// queued (within the limits) and sends it; it ends when the queue is empty.
func (s *Store) groupLoop() {
	g := &s.group
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.senders--
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		// Not the callers' contexts: a caller whose context ends while its
		// append is still queued leaves the queue by itself.
		conn, err := s.pool.Acquire(context.Background())
		g.mu.Lock()
		batch, keys := s.takeGroupLocked()
		g.mu.Unlock()
		if err != nil {
			for _, r := range batch {
				r.finish(AppendResult{}, errf("append: acquire a connection", err)) // nothing was sent
			}
			continue
		}
		if len(batch) > 0 {
			s.sendGroup(conn, batch, keys)
		}
		conn.Release()
	}
}

// takeGroupLocked takes the next group off the queue: at least one append,
// then, in arrival order, as many as fit the limits: GroupMaxAppends appends,
// GroupMaxEvents events, MaxBatchBytes bytes and MaxLockKeys keys in the
// union of their keys (so that grouping never escalates a lock). Appends whose
// context ended are dropped with their error (nothing was sent). It returns
// the union of the group's keys, each in its strongest mode.
func (s *Store) takeGroupLocked() ([]*groupReq, map[int64]bool) {
	g := &s.group
	maxAppends := orDefault(s.cfg.GroupMaxAppends, DefaultGroupMaxAppends)
	maxEvents := orDefault(s.cfg.GroupMaxEvents, DefaultGroupMaxEvents)
	var batch []*groupReq
	keys := make(map[int64]bool)
	n, events, size := 0, 0, 0
	now := time.Now()
	for n < len(g.queue) && len(batch) < maxAppends {
		r := g.queue[n]
		if err := r.ctx.Err(); err != nil {
			r.taken = true
			r.finish(AppendResult{}, errf("append", err))
			n++
			continue
		}
		if len(batch) > 0 {
			added := 0
			for _, k := range r.locks.keys {
				if _, ok := keys[k]; !ok {
					added++
				}
			}
			if events+len(r.events) > maxEvents || size+r.size > s.cfg.MaxBatchBytes || len(keys)+added > s.cfg.MaxLockKeys {
				break
			}
		}
		r.taken = true
		batch = append(batch, r)
		g.recordWait(now.Sub(r.queued))
		events += len(r.events)
		size += r.size
		for i, k := range r.locks.keys {
			keys[k] = keys[k] || r.locks.excl[i]
		}
		n++
	}
	g.queue = slices.Delete(g.queue, 0, n)
	return batch, keys
}

// sendGroup sends one group on conn and gives every member its outcome.
func (s *Store) sendGroup(conn *pgxpool.Conn, batch []*groupReq, keys map[int64]bool) {
	g := &s.group
	if len(batch) == 1 {
		// The path without grouping.
		g.alone.Add(1)
		r := batch[0]
		if err := r.ctx.Err(); err != nil {
			r.finish(AppendResult{}, errf("append", err)) // nothing was sent
			return
		}
		res, err := s.appendEvents(r.ctx, conn, r.events, r.cond, true)
		if err == nil {
			s.Notify(r.ctx)
		}
		r.finish(res, err)
		return
	}
	g.groups.Add(1)
	g.grouped.Add(int64(len(batch)))
	storeMax(&g.maxMembers, int64(len(batch)))

	// The group's call ends early only when every member's context has.
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	defer cancel()
	var left atomic.Int64
	left.Store(int64(len(batch)))
	for _, r := range batch {
		stop := context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}

	results, err := s.appendGroupCall(ctx, conn, batch, keys)
	if err != nil {
		if unknownOutcome(err) {
			for _, r := range batch {
				s.markGrouped(r.ctx, len(batch))
				r.finish(AppendResult{}, errOutcome("append", err))
			}
			return
		}
		// The server rolled the group back: nothing of it was written. Each
		// member runs alone, as it would have without grouping.
		s.cfg.Logger.WarnContext(ctx, "pgdcb: group append failed; retrying its appends alone", "appends", len(batch), "err", err)
		g.retried.Add(int64(len(batch)))
		notify := false
		for _, r := range batch {
			if err := r.ctx.Err(); err != nil {
				r.finish(AppendResult{}, errf("append", err)) // nothing was sent for it
				continue
			}
			res, err := s.appendEvents(r.ctx, conn, r.events, r.cond, true)
			notify = notify || err == nil
			r.finish(res, err)
		}
		if notify {
			s.Notify(ctx)
		}
		return
	}
	notify := false
	for i, r := range batch {
		notify = notify || results[i].err == nil
		s.markGrouped(r.ctx, len(batch))
		r.finish(results[i].res, results[i].err)
	}
	if notify {
		s.Notify(ctx)
	}
}

// appendGroupCall sends the group as one append_group call and decodes each
// member's outcome. An error is the call's: nothing of the group was written
// unless it is of unknown outcome.
func (s *Store) appendGroupCall(ctx context.Context, db dbtx, batch []*groupReq, keys map[int64]bool) ([]groupResult, error) {
	var (
		types        []string
		tagCounts    []int32
		allTags      = []string{}
		data         []string
		meta         []*string
		ids          []pgtype.UUID
		memberEvents = make([]int32, len(batch))
		memberItems  = make([]int32, len(batch))
		afterTx      = make([]string, len(batch))
		afterPos     = make([]int64, len(batch))
		afterSnap    = make([]*string, len(batch))
		items        = checksFor(nil)
	)
	for m, r := range batch {
		memberEvents[m] = int32(len(r.events))
		for _, e := range r.events {
			types = append(types, e.Type)
			tagCounts = append(tagCounts, int32(e.Tags.Len()))
			allTags = append(allTags, e.Tags.Strings()...)
			data = append(data, string(e.Data))
			var mp *string
			if len(e.Metadata) > 0 {
				ms := string(e.Metadata)
				mp = &ms
			}
			meta = append(meta, mp)
			var id pgtype.UUID
			if e.ID != [16]byte{} {
				id = pgtype.UUID{Bytes: e.ID, Valid: true}
			}
			ids = append(ids, id)
		}
		c := checksFor(r.cond)
		memberItems[m] = int32(len(c.idem))
		items.idem = append(items.idem, c.idem...)
		items.typeCounts = append(items.typeCounts, c.typeCounts...)
		items.types = append(items.types, c.types...)
		items.tagCounts = append(items.tagCounts, c.tagCounts...)
		items.tags = append(items.tags, c.tags...)
		afterTx[m] = "0"
		if r.cond != nil && r.cond.After != nil {
			afterTx[m] = strconv.FormatUint(r.cond.After.TransactionID, 10)
			afterPos[m] = r.cond.After.Position
			if r.cond.After.Snapshot != nil {
				sn := r.cond.After.Snapshot.String()
				afterSnap[m] = &sn
			}
		}
	}
	// The union of the members' keys: at most MaxLockKeys (takeGroupLocked
	// sees to it; a member's own set is already escalated if need be).
	locks := sortedLocks(keys)
	var (
		statuses  []string
		txID      *uint64
		positions []int64
		conflicts []*int64
	)
	err := db.QueryRow(ctx, s.sql.appendGroup,
		types, tagCounts, allTags, data, meta, ids, memberEvents,
		locks.keys, locks.excl,
		items.idem, items.typeCounts, items.types, items.tagCounts, items.tags, memberItems,
		afterTx, afterPos, afterSnap,
	).Scan(&statuses, &txID, &positions, &conflicts)
	if err != nil {
		return nil, err
	}
	if len(statuses) != len(batch) || len(conflicts) != len(batch) {
		return nil, fmt.Errorf("pgdcb: append: append_group returned %d statuses for %d appends", len(statuses), len(batch))
	}
	out := make([]groupResult, len(batch))
	p := 0
	for m, r := range batch {
		switch st := statuses[m]; {
		case st == "ok" && txID != nil && p+len(r.events) <= len(positions):
			out[m].res = AppendResult{TransactionID: *txID, Positions: positions[p : p+len(r.events) : p+len(r.events)]}
			p += len(r.events)
		case st == "idempotent" && r.cond != nil && conflicts[m] != nil:
			out[m].err = &appendif.IdempotentError{Query: r.cond.Idempotency, ExistingPosition: *conflicts[m]}
		case st == "condition" && r.cond != nil && conflicts[m] != nil:
			out[m].err = &appendif.ConditionFailedError{Query: r.cond.FailIfEventsMatch, After: r.cond.After, ConflictPosition: *conflicts[m]}
		default:
			// Cannot happen; the group committed, so say so.
			out[m].err = &pgdcb.OutcomeUnknownError{Op: "append", Err: fmt.Errorf("unexpected status %q from append_group", st)}
		}
	}
	return out, nil
}
