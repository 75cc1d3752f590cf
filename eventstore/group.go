package eventstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
)

// Group commit (on unless Config.GroupCommitDisabled, docs/GROUPCOMMIT.md).
//
// A call that finds the queue empty and fewer than GroupSenders senders at
// work is sent at once by its caller (it holds a sender's place meanwhile;
// if calls queued behind it, a sender goroutine takes its place when it is
// done). Otherwise the call queues, and starts a sender goroutine if there
// are fewer than GroupSenders. A sender acquires a pooled connection, then
// takes everything queued (within the limits, see takeGroupLocked) and sends
// it as one call of append_group (a group of one: of append_events, see
// alone.go); it repeats until the queue is empty. With one writer every call
// is sent at once: no waiting for company.
//
// Nothing sent by a sender's place ever waits for a lock (docs/GROUPCOMMIT.md,
// "Busy keys"): the group's keys are tried first, in the same statement
// (statements.appendGroupWire, statements.appendAloneWire); when one is busy (held by a transaction that
// shares it with a member) nothing is written, the members that need a busy
// key leave the group, and the others are sent again at once. A member that
// left is sent by its own caller, alone, on a connection of its own and
// outside the senders' places (appendBehind): it waits for its key there,
// as it would without grouping, and delays nobody who does not share it.

// Defaults of the group fields of Config.
const (
	defaultGroupMaxAppends = 64
	defaultGroupMaxEvents  = 1000
	DefaultGroupSenders    = 2
)

type groupResult struct {
	res pgdcb.AppendResult
	err error
	// busy: nothing was sent for the append; it needs key busyKey, which
	// was busy, and is to be sent by appendBehind.
	busy    bool
	busyKey int64
	// resend: r was settled as absent (nothing written) after its send
	// failed; its caller sends it again (outcome).
	resend bool
	// abandoned: r's caller gave up before it was sent and answered
	// itself (claim said so); nothing was sent and there is no answer to
	// give (reply).
	abandoned bool
}

// reply gives r its answer, unless its caller abandoned it.
func (r *groupReq) reply(out groupResult) {
	if !out.abandoned {
		r.done <- out
	}
}

type groupReq struct {
	ctx    context.Context
	events []pgdcb.Event
	cond   *appendif.Condition
	id     uuid.UUID        // identifies the call's writes (settle.go)
	locks  lockSet          // the append's own keys (as append_events would take them)
	size   int              // bytes, as for MaxBatchBytes
	done   chan groupResult // buffered: the sender never blocks
	taken  bool             // under groupCommitter.mu: a sender took it
	// sent, under groupCommitter.mu: r's bytes may be on their way to the
	// server (set before each send; cleared when r goes back to the queue
	// or its group was rolled back). Only a sent r can have an unknown
	// outcome.
	sent bool
	// abandoned, under groupCommitter.mu: r's context ended while it was
	// taken but not sent; its caller answered a definite error itself, and
	// r is never sent afterwards (claim).
	abandoned bool
	alone     bool      // under groupCommitter.mu: send it in a group of its own
	again     bool      // it came back from appendBehind once
	queued    time.Time // when it joined the queue
}

// keyUse counts the holders of a key in each mode.
type keyUse struct{ shared, excl int }

// conflicts says whether taking ls would conflict with the keys in use.
func conflicts(use map[int64]keyUse, ls lockSet) bool {
	for i, k := range ls.keys {
		u := use[k]
		if u.excl > 0 || (ls.excl[i] && u.shared > 0) {
			return true
		}
	}
	return false
}

// addUse adds (n = 1) or removes (n = -1) keys, each in its mode, to use.
func addUse(use map[int64]keyUse, keys map[int64]bool, n int) {
	for k, excl := range keys {
		u := use[k]
		if excl {
			u.excl += n
		} else {
			u.shared += n
		}
		if u.excl == 0 && u.shared == 0 {
			delete(use, k)
		} else {
			use[k] = u
		}
	}
}

// signalLocked wakes the tests that wait for a change of the queue, the
// senders or the gates (group_export_test.go); nothing when none waits.
func (g *groupCommitter) signalLocked() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

func (r *groupReq) finish(res pgdcb.AppendResult, err error) {
	r.done <- groupResult{res: res, err: err}
}

type groupCommitter struct {
	s *Store // the store it sends for

	mu      sync.Mutex
	queue   []*groupReq
	senders int
	gates   map[int64]*keyGate // appendBehind's, by busy key
	lanes   chan struct{}      // appendBehind's connections: one token each
	changed chan struct{}      // closed when queue, senders or gates change, if a test waits (group_export_test.go)
	// inflight: the keys of this store's sends in flight (groups, and calls
	// sent at once by their callers), with how many hold each in each mode.
	// A group never takes a member whose keys conflict with them: it would
	// find them busy; it waits in the queue for the next group instead.
	inflight map[int64]keyUse
	// retryHook, set by tests only, runs before each member of a failed
	// group is retried alone (i: its index).
	retryHook func(conn *pgxpool.Conn, i int)

	groups     atomic.Int64 // server calls sent for groups of two or more
	grouped    atomic.Int64 // appends in those calls
	alone      atomic.Int64 // groups of one
	retried    atomic.Int64 // members retried alone after a group failed
	maxMembers atomic.Int64
	behind     atomic.Int64 // appends that found a key busy, sent by appendBehind
	requeued   atomic.Int64 // members put back in the queue, never sent

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
	// Busy is the number of appends that found one of their keys held by
	// another transaction when their group (or they alone) tried them: they
	// left the group unsent, and were sent alone, on a connection of their
	// own, to wait for the key there (docs/GROUPCOMMIT.md, "Busy keys").
	Busy int64
	// Requeued is the number of appends put back in the queue unsent
	// because their sender's connection was lost before their turn.
	Requeued int64
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
	d.Busy -= before.Busy
	d.Requeued -= before.Requeued
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
		MaxAppends: g.maxMembers.Load(), Retried: g.retried.Load(), Busy: g.behind.Load(), Requeued: g.requeued.Load(),
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

// appendGrouped is appendPool with group commit on (events validated).
func (g *groupCommitter) appendGrouped(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	s := g.s
	return s.group.appendGroupedAgain(ctx, events, cond, false)
}

// appendGroupedAgain is appendGrouped; again says the append found a key
// busy before and came back from appendBehind (it will not twice).
func (g *groupCommitter) appendGroupedAgain(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition, again bool) (pgdcb.AppendResult, error) {
	s := g.s
	if err := ctx.Err(); err != nil {
		return pgdcb.AppendResult{}, errf("append", err) // nothing was sent
	}
	maxSenders := s.cfg.GroupSenders
	r := &groupReq{ctx: ctx, events: events, cond: cond, id: s.settler.callID(events), done: make(chan groupResult, 1), again: again,
		locks: locksFor(s.cfg.Schema, events, cond, s.cfg.MaxLockKeys)}
	g.mu.Lock()
	if g.inflight == nil {
		g.inflight = make(map[int64]keyUse)
	}
	if len(g.queue) == 0 && g.senders < maxSenders && !conflicts(g.inflight, r.locks) {
		// Nobody to group with and a sender's place free: this call is sent
		// at once, by its caller, as a group of one. Calls that arrive
		// meanwhile queue; a sender takes over if any did.
		g.senders++
		g.signalLocked()
		keys := unionKeys([]*groupReq{r})
		addUse(g.inflight, keys, 1)
		g.mu.Unlock()
		out := s.group.sendAlone(r)
		g.mu.Lock()
		addUse(g.inflight, keys, -1)
		if len(g.queue) > 0 {
			s.group.startSender(ctx)
		} else {
			g.senders--
			g.signalLocked()
		}
		g.mu.Unlock()
		return s.group.outcome(r, out)
	}
	g.mu.Unlock()
	for _, e := range events {
		r.size += e.Size()
	}
	g.mu.Lock()
	r.queued = time.Now()
	g.queue = append(g.queue, r)
	g.signalLocked()
	if g.senders < maxSenders {
		g.senders++
		g.signalLocked()
		s.group.startSender(ctx)
	}
	g.mu.Unlock()
	select {
	case out := <-r.done:
		return s.group.outcome(r, out)
	case <-ctx.Done():
	}
	g.mu.Lock()
	if !r.taken {
		if i := slices.Index(g.queue, r); i >= 0 {
			g.queue = slices.Delete(g.queue, i, i+1)
			g.signalLocked()
		}
		g.mu.Unlock()
		return pgdcb.AppendResult{}, errf("append", ctx.Err()) // nothing was sent
	}
	if !r.sent {
		// Taken by a sender that has not sent it yet (an earlier member
		// of its group is still being sent or settled): it never will be
		// (claim), so nothing was written.
		r.abandoned = true
		g.signalLocked()
		g.mu.Unlock()
		return pgdcb.AppendResult{}, errf("append", ctx.Err()) // nothing was sent
	}
	g.mu.Unlock()
	// In flight: the sender settles it (settle.go); wait for its answer.
	if out, ok := s.settler.awaitSettled(r); ok {
		return s.group.outcome(r, out)
	}
	return pgdcb.AppendResult{}, &pgdcb.OutcomeUnknownError{Op: "append", Err: ctx.Err()}
}

// outcome is the caller's answer for r: its result, or, when its group
// found one of its keys busy (nothing was sent), appendBehind's.
func (g *groupCommitter) outcome(r *groupReq, out groupResult) (pgdcb.AppendResult, error) {
	s := g.s
	if out.resend {
		// Settled as absent (settle.go): sent again on the path without
		// grouping, by the caller, waiting for its keys there.
		s.settler.resent.Add(1)
		return s.group.appendOne(r.ctx, r.events, r.cond)
	}
	if out.busy {
		return s.group.appendBehind(r.ctx, r.events, r.cond, out.busyKey, r.again)
	}
	return out.res, out.err
}

// sendAlone sends r at once, as a group of one, on a pooled connection of
// its caller's (who holds a sender's place); one that was closed before
// anything was sent is replaced (sendFresh).
func (g *groupCommitter) sendAlone(r *groupReq) groupResult {
	s := g.s
	s.group.alone.Add(1)
	var out groupResult
	if err := s.sendFresh(r.ctx, func(conn *pgxpool.Conn) error {
		o, unsent, _ := s.group.trySendAlone(conn, r)
		out = o
		return unsent
	}); err != nil {
		return groupResult{err: errf("append", err)} // nothing was sent
	}
	return out
}

// appendOne sends one append (events validated) as its own transaction on a
// pooled connection, waiting for its keys, telling a certain failure from an
// unknown outcome: the path of every call without grouping, and of an
// append that found a key busy.
func (g *groupCommitter) appendOne(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition) (pgdcb.AppendResult, error) {
	s := g.s
	res, err := s.settler.sendSettled(ctx, events, cond, s.settler.callID(events))
	if err == nil {
		s.Notify(ctx)
	}
	return res, err
}

// keyGate lets one appendBehind at a time hold a connection for one busy
// key; the others that wait for the same key wait here.
type keyGate struct {
	turn chan struct{} // one token: the connection's
	n    int           // under groupCommitter.mu: appends at this gate
	sent int64         // under groupCommitter.mu: appends this gate let through that had their keys
}

// appendBehind sends an append that found key busy: alone, on a
// connection of its own and outside the senders' places, waiting for its
// keys as without grouping, so that it delays no append that does not
// share one of them. Of the appends that found the same key busy, one at a
// time holds a connection (the others wait at the key's gate, not in
// PostgreSQL); in all, these appends hold at most the pool's size less
// GroupSenders connections (at least one), so that the senders keep theirs.
//
// An append whose turn comes after another one went through the gate and
// had its keys (the key was free a moment ago) goes back to the group
// committer instead, once (again false), so that the appends that queued
// up behind a held key are grouped again when it is released, rather than
// sent one commit each.
func (g *groupCommitter) appendBehind(ctx context.Context, events []pgdcb.Event, cond *appendif.Condition, key int64, again bool) (pgdcb.AppendResult, error) {
	s := g.s
	g.behind.Add(1)
	g.mu.Lock()
	if g.gates == nil {
		g.gates = make(map[int64]*keyGate)
		n := s.maxConns - s.cfg.GroupSenders
		g.lanes = make(chan struct{}, max(1, n))
	}
	gate := g.gates[key]
	if gate == nil {
		gate = &keyGate{turn: make(chan struct{}, 1)}
		g.gates[key] = gate
	}
	gate.n++
	sent := gate.sent
	g.signalLocked()
	lanes := g.lanes
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if gate.n--; gate.n == 0 {
			delete(g.gates, key)
		}
		g.signalLocked()
		g.mu.Unlock()
	}
	select {
	case gate.turn <- struct{}{}:
	case <-ctx.Done():
		leave()
		return pgdcb.AppendResult{}, errf("append", ctx.Err()) // nothing was sent
	}
	g.mu.Lock()
	back := !again && gate.sent != sent
	g.mu.Unlock()
	if back {
		<-gate.turn
		leave()
		return s.group.appendGroupedAgain(ctx, events, cond, true)
	}
	defer leave()
	defer func() { <-gate.turn }()
	select {
	case lanes <- struct{}{}:
	case <-ctx.Done():
		return pgdcb.AppendResult{}, errf("append", ctx.Err()) // nothing was sent
	}
	defer func() { <-lanes }()
	res, err := s.group.appendOne(ctx, events, cond)
	if err == nil || errors.Is(err, pgdcb.ErrConditionFailed) || errors.Is(err, pgdcb.ErrIdempotent) {
		// It had its keys.
		g.mu.Lock()
		gate.sent++
		g.mu.Unlock()
	}
	return res, err
}

// startSender starts a sender goroutine (g.senders counted already, under
// g.mu), one that Close waits for (close.go). ctx gives it values, not
// cancellation.
func (g *groupCommitter) startSender(ctx context.Context) {
	s := g.s
	if !s.bg.run(ctx, false, g.groupLoop) {
		s.group.senders-- // cannot happen: the calling append holds the store open
	}
}

// groupLoop is a sender: whenever it has a connection, it takes everything
// queued (within the limits) and sends it; it ends when the queue is empty.
// ctx ends only when Close gives up waiting.
func (g *groupCommitter) groupLoop(ctx context.Context) {
	s := g.s
	for {
		g.mu.Lock()
		if len(g.queue) == 0 {
			g.senders--
			g.signalLocked()
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		// Not the callers' contexts: a caller whose context ends while its
		// append is still queued leaves the queue by itself.
		conn, err := s.acquire(ctx)
		g.mu.Lock()
		batch := s.group.takeGroupLocked()
		if len(batch) == 0 && len(g.queue) > 0 {
			// Everything queued conflicts with sends in flight; their
			// senders (or callers) take it over when they are done.
			g.senders--
			g.signalLocked()
			g.mu.Unlock()
			if err == nil {
				conn.Release()
			}
			return
		}
		keys := unionKeys(batch)
		addUse(g.inflight, keys, 1)
		g.mu.Unlock()
		if err != nil {
			for _, r := range batch {
				r.finish(pgdcb.AppendResult{}, errf("append: acquire a connection", err)) // nothing was sent
			}
		} else {
			if len(batch) > 0 {
				s.group.sendGroup(conn, batch)
			}
			conn.Release()
		}
		g.mu.Lock()
		addUse(g.inflight, keys, -1)
		g.mu.Unlock()
	}
}

// takeGroupLocked takes the next group off the queue: in arrival order, as
// many appends as fit the limits: GroupMaxAppends appends, GroupMaxEvents
// events, MaxBatchBytes bytes and MaxLockKeys keys in the union of their
// keys (so that grouping never escalates a lock). An append whose keys
// conflict with a send in flight (it would find them busy), or with an
// earlier append left in the queue (so that no later append overtakes it
// on a key they share), stays in the queue for a later group. An append
// marked alone (put back after its sender's connection was lost) is sent
// in a group of its own. Appends whose context ended are dropped with
// their error (nothing was sent). The group may be empty when everything
// queued conflicts with the sends in flight.
func (g *groupCommitter) takeGroupLocked() []*groupReq {
	s := g.s
	maxAppends := s.cfg.GroupMaxAppends
	maxEvents := s.cfg.GroupMaxEvents
	var batch, rest []*groupReq
	var left map[int64]keyUse // keys of the appends left in the queue
	keys := make(map[int64]bool)
	events, size := 0, 0
	now := time.Now()
	n := 0
	for ; n < len(g.queue) && len(batch) < maxAppends; n++ {
		r := g.queue[n]
		if err := r.ctx.Err(); err != nil {
			r.taken = true
			r.finish(pgdcb.AppendResult{}, errf("append", err))
			continue
		}
		if conflicts(g.inflight, r.locks) || (left != nil && conflicts(left, r.locks)) {
			if left == nil {
				left = make(map[int64]keyUse)
			}
			addUse(left, unionKeys([]*groupReq{r}), 1)
			rest = append(rest, r)
			continue
		}
		if len(batch) > 0 {
			if r.alone || batch[0].alone {
				break
			}
			added := 0
			for _, k := range r.locks.keys {
				if _, ok := keys[k]; !ok {
					added++
				}
			}
			if events+len(r.events) > maxEvents || size+r.size > s.cfg.MaxBatchBytes || len(keys)+added > s.cfg.MaxLockKeys {
				break
			}
		} else if r.alone {
			r.taken = true
			batch = append(batch, r)
			g.recordWait(now.Sub(r.queued))
			n++
			break
		}
		r.taken = true
		batch = append(batch, r)
		g.recordWait(now.Sub(r.queued))
		events += len(r.events)
		size += r.size
		for i, k := range r.locks.keys {
			keys[k] = keys[k] || r.locks.excl[i]
		}
	}
	g.queue = append(rest, g.queue[n:]...)
	g.signalLocked()
	return batch
}

// unionKeys is the union of the members' keys, each in its strongest mode.
func unionKeys(batch []*groupReq) map[int64]bool {
	keys := make(map[int64]bool)
	for _, r := range batch {
		for i, k := range r.locks.keys {
			keys[k] = keys[k] || r.locks.excl[i]
		}
	}
	return keys
}

// errConnLost: the sender's connection was closed before the append was
// sent.
var errConnLost = errors.New("connection closed before the append was sent")

// claim is the one place that says, before an append is sent on conn,
// whether it will be. Under the group's mutex: an append its caller
// abandoned is never sent (abandoned: no answer either); one whose context
// ended is not (err: the answer); on a closed conn it is not (lost: pgx
// closes a connection when a context ends during a call; the append goes
// back to the queue). Otherwise it is marked sent before its bytes go out,
// so that its caller, should its context end from now on, waits for its
// settled answer rather than answer for it. Every send of the group
// committer asks it first. A send that fails after it is classified by
// errOutcome (outcome.go): certain only on a server error of severity
// ERROR, else the outcome is unknown.
func (g *groupCommitter) claim(conn *pgxpool.Conn, r *groupReq) (abandoned, lost bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if r.abandoned {
		return true, false, nil
	}
	if err := r.ctx.Err(); err != nil {
		return false, false, errf("append", err)
	}
	if conn.Conn().IsClosed() {
		return false, true, nil
	}
	r.sent = true
	return false, false, nil
}

// claimGroup is claim for the members of a group on one connection: the
// members abandoned by their callers are left out (no answer), those whose
// context ended are answered with its error; if two or more remain, they
// are marked sent. It returns the remaining members.
func (g *groupCommitter) claimGroup(batch []*groupReq) []*groupReq {
	g.mu.Lock()
	defer g.mu.Unlock()
	kept := batch[:0]
	for _, r := range batch {
		switch {
		case r.abandoned:
		case r.ctx.Err() != nil:
			r.finish(pgdcb.AppendResult{}, errf("append", r.ctx.Err())) // nothing was sent
		default:
			kept = append(kept, r)
		}
	}
	if len(kept) > 1 {
		for _, r := range kept {
			r.sent = true
		}
	}
	return kept
}

// unsend marks members whose send certainly wrote nothing (their group
// was rolled back, or found keys busy) as not sent, before they are sent
// again: a caller that gives up meanwhile answers for itself.
func (g *groupCommitter) unsend(batch []*groupReq) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range batch {
		r.sent = false
	}
}

// requeue puts appends that were never sent back at the head of the
// queue, each to be sent in a group of its own (one of them may be why its
// group failed), and makes sure a sender will take them.
func (g *groupCommitter) requeue(rs []*groupReq) {
	s := g.s
	if len(rs) == 0 {
		return
	}
	g.requeued.Add(int64(len(rs)))
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	back := make([]*groupReq, 0, len(rs))
	for _, r := range rs {
		if r.abandoned {
			continue // its caller answered: never sent
		}
		r.taken, r.sent, r.alone, r.queued = false, false, true, now
		back = append(back, r)
	}
	if len(back) == 0 {
		return
	}
	g.queue = append(back, g.queue...)
	g.signalLocked()
	if g.senders < s.cfg.GroupSenders {
		g.senders++
		g.signalLocked()
		s.group.startSender(back[0].ctx)
	}
}

// requeueUnsent is requeue for members whose send on a sender's
// connection never left the client (unsent, as trySendAlone says): the
// sender's form of sendFresh's retry (acquire.go), another connection.
func (g *groupCommitter) requeueUnsent(rs []*groupReq, unsent error) {
	s := g.s
	if notSent(unsent) {
		s.settler.notSent.Add(1)
	}
	s.group.requeue(rs)
}

// trySendAlone sends r on conn as a group of one. When nothing was sent
// (conn was closed before, or the send never left the client: notSent) it
// says why (unsent), and the caller sends r on another connection.
//
// When the send fails with an unknown outcome, r is settled (settle.go):
// conn is released first (released reports it; conn must not be used
// again then) and r's answer is what the settling found.
func (g *groupCommitter) trySendAlone(conn *pgxpool.Conn, r *groupReq) (out groupResult, unsent error, released bool) {
	s := g.s
	if abandoned, lost, err := s.group.claim(conn, r); abandoned {
		return groupResult{abandoned: true}, nil, false
	} else if err != nil {
		return groupResult{err: err}, nil, false
	} else if lost {
		return groupResult{}, errConnLost, false
	}
	b := backendOf(conn)
	res, busy, err := s.tryCallAlone(r.ctx, conn, r)
	switch {
	case notSent(err):
		// Nothing left the client (acquire.go): as a closed conn.
		return groupResult{}, err, false
	case err != nil:
		err = errOutcome("append", err)
		if !errors.Is(err, pgdcb.ErrOutcomeUnknown) || s.cfg.SettleDisabled {
			return groupResult{err: err}, nil, false
		}
		discard(r.ctx, conn) // dead or in an unknown state
		return s.settler.settleMember(b, r, err), nil, true
	case busy != nil:
		return groupResult{busy: true, busyKey: firstBusy(r, busy)}, nil, false
	}
	if res[0].err == nil {
		s.Notify(r.ctx)
	}
	return res[0], nil, false
}

// sendGroup sends one group on conn and gives every member its outcome.
// A member that needs a busy key leaves the group (its caller sends it
// alone, see appendBehind) and the others are sent again; a group that
// fails with a certain error is retried member by member.
func (g *groupCommitter) sendGroup(conn *pgxpool.Conn, batch []*groupReq) {
	s := g.s
	if len(batch) == 1 {
		g.alone.Add(1)
		if out, unsent, _ := s.group.trySendAlone(conn, batch[0]); unsent != nil {
			s.group.requeueUnsent(batch, unsent)
		} else {
			batch[0].reply(out)
		}
		return
	}
	g.groups.Add(1)
	g.grouped.Add(int64(len(batch)))
	storeMax(&g.maxMembers, int64(len(batch)))
	b := backendOf(conn)
	for len(batch) > 1 {
		if conn.Conn().IsClosed() {
			// Closed before anything was sent (the server ended it): the
			// members go back to the queue, for another connection.
			s.group.requeue(batch)
			return
		}
		if batch = s.group.claimGroup(batch); len(batch) < 2 {
			break // one left (or none): sent alone below
		}
		results, busy, err := s.group.groupCall(conn, batch)
		if notSent(err) {
			// Nothing left the client (acquire.go): the members go back
			// to the queue, for another connection.
			s.group.requeueUnsent(batch, err)
			return
		}
		if err != nil {
			if unknownOutcome(err) {
				for _, r := range batch {
					s.markGrouped(r.ctx, len(batch))
				}
				// Each member settled (settle.go), after conn, dead or in
				// an unknown state, is discarded (groupLoop's Release is
				// then a no-op).
				discard(batch[0].ctx, conn)
				s.settler.settleGroup(context.WithoutCancel(batch[0].ctx), b, batch, errOutcome("append", err))
				return
			}
			// The server rolled the group back: nothing of it was written.
			// Each member runs alone, as it would have without grouping.
			s.cfg.Logger.WarnContext(context.WithoutCancel(batch[0].ctx), "pgdcb: group append failed; retrying its appends alone", "appends", len(batch), "err", err)
			g.retried.Add(int64(len(batch)))
			s.group.unsend(batch)
			s.group.sendEach(conn, batch)
			return
		}
		if busy == nil {
			notify := false
			for i, r := range batch {
				notify = notify || results[i].err == nil
				s.markGrouped(r.ctx, len(batch))
				r.done <- results[i]
			}
			if notify {
				s.Notify(context.WithoutCancel(batch[0].ctx))
			}
			return
		}
		// Nothing was written. The members that need a busy key (in the
		// mode the group asked for it) leave; the others go again. At
		// least one leaves: the union asked each key in the strongest mode
		// a member needs it in.
		keys := unionKeys(batch)
		kept := batch[:0]
		for _, r := range batch {
			if k, blocked := blockedBy(r, busy, keys); blocked {
				r.done <- groupResult{busy: true, busyKey: k}
				continue
			}
			kept = append(kept, r)
		}
		batch = kept
		s.group.unsend(batch) // nothing was written: claimed again before the next send
	}
	if len(batch) == 1 {
		s.group.sendEach(conn, batch)
	}
}

// sendEach sends the members one by one on conn, each as a group of one.
// Once conn is closed (a member's context ended during its call), the
// members not yet sent go back to the queue.
func (g *groupCommitter) sendEach(conn *pgxpool.Conn, batch []*groupReq) {
	s := g.s
	for i, r := range batch {
		if s.group.retryHook != nil {
			s.group.retryHook(conn, i)
		}
		out, unsent, released := s.group.trySendAlone(conn, r)
		if unsent != nil {
			s.group.requeueUnsent(batch[i:], unsent)
			return
		}
		r.reply(out)
		if released {
			// conn was lost sending r (which was settled): the members
			// not yet sent go back to the queue.
			s.group.requeue(batch[i+1:])
			return
		}
	}
}

// groupCtx is the context of a group's call: it ends early only when every
// member's context has.
func groupCtx(batch []*groupReq) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	var left atomic.Int64
	left.Store(int64(len(batch)))
	stops := make([]func() bool, 0, len(batch))
	for _, r := range batch {
		stops = append(stops, context.AfterFunc(r.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// groupCall sends the group (two or more members) in one call, its keys
// tried first.
func (g *groupCommitter) groupCall(conn *pgxpool.Conn, batch []*groupReq) ([]groupResult, map[int64]bool, error) {
	s := g.s
	ctx, cancel := groupCtx(batch)
	defer cancel()
	return s.group.tryCall(ctx, conn, batch)
}

// blockedBy says whether r needs one of the busy keys in a mode it could
// not have: a key it needs exclusively, or one the group asked only in
// shared mode (so someone holds it exclusively). It returns the smallest.
func blockedBy(r *groupReq, busy map[int64]bool, asked map[int64]bool) (int64, bool) {
	for i, k := range r.locks.keys {
		if busy[k] && (r.locks.excl[i] || !asked[k]) {
			return k, true
		}
	}
	return 0, false
}

// firstBusy is the smallest of r's keys that was busy.
func firstBusy(r *groupReq, busy map[int64]bool) int64 {
	for _, k := range r.locks.keys {
		if busy[k] {
			return k
		}
	}
	return r.locks.keys[0]
}

// tryCall sends the members as one call of append_group, their keys tried
// first (statements.appendGroupWire), and decodes each member's outcome. When a
// key was busy it returns the busy keys, and nothing was written. An error
// is the call's: nothing was written unless it is of unknown outcome.
func (g *groupCommitter) tryCall(ctx context.Context, conn *pgxpool.Conn, batch []*groupReq) ([]groupResult, map[int64]bool, error) {
	s := g.s
	calls := make([]wireCall, len(batch))
	for m, r := range batch {
		calls[m] = newWireCall(r.events, r.cond, r.id)
	}
	// The union of the members' keys: at most MaxLockKeys (takeGroupLocked
	// sees to it; a member's own set is already escalated if need be).
	params := getWireParams()
	defer putWireParams(params)
	params.appendGroupWire(calls, sortedLocks(unionKeys(batch)))
	var (
		busy      []int64
		statuses  []string
		txID      *uint64
		positions []int64
		conflicts []*int64
		at        int64
	)
	err := s.callRow(ctx, conn, &s.sql.appendGroupWire, params, func(cols [][]byte) error {
		if len(cols) != 6 {
			return errWireFormat
		}
		var err error
		if at, err = colTimestamptz(cols[5]); err != nil {
			return err
		}
		if busy, err = colInt8Array(cols[0]); err != nil {
			return err
		}
		statuses = make([]string, 0, arrayLen(cols[1]))
		if err := colArray(cols[1], func(e []byte) error {
			statuses = append(statuses, colString(e))
			return nil
		}); err != nil {
			return err
		}
		if v, ok, err := colInt8(cols[2]); err != nil {
			return err
		} else if ok {
			u := uint64(v)
			txID = &u
		}
		if positions, err = colInt8Array(cols[3]); err != nil {
			return err
		}
		conflicts = make([]*int64, 0, arrayLen(cols[4]))
		return colArray(cols[4], func(e []byte) error {
			v, ok, err := colInt8(e)
			if !ok {
				conflicts = append(conflicts, nil)
			} else {
				conflicts = append(conflicts, &v)
			}
			return err
		})
	})
	if err != nil {
		return nil, nil, err
	}
	if len(busy) > 0 {
		return nil, busySet(busy), nil
	}
	if len(statuses) != len(batch) || len(conflicts) != len(batch) {
		return nil, nil, fmt.Errorf("pgdcb: append: append_group returned %d statuses for %d appends", len(statuses), len(batch))
	}
	out := make([]groupResult, len(batch))
	p := 0
	for m, r := range batch {
		switch st := statuses[m]; {
		case st == "ok" && txID != nil && p+len(r.events) <= len(positions):
			out[m].res = pgdcb.AppendResult{TransactionID: *txID, Positions: positions[p : p+len(r.events) : p+len(r.events)], OccurredAt: recordedAt(at)}
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
	return out, nil, nil
}
