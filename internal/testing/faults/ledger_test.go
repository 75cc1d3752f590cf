package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// outcome is what a write's caller knows of it.
type outcome int

const (
	acked    outcome = iota // it returned no error
	definite                // an error not matching pgdcb.ErrOutcomeUnknown: it wrote nothing
	unknown                 // an error matching pgdcb.ErrOutcomeUnknown: it may have committed
)

func classify(err error) outcome {
	switch {
	case err == nil:
		return acked
	case errors.Is(err, pgdcb.ErrOutcomeUnknown):
		return unknown
	default:
		return definite
	}
}

// errKind is a short name for an error, to count errors by kind.
func errKind(err error) string {
	var prefix string
	if errors.Is(err, pgdcb.ErrOutcomeUnknown) {
		prefix = "unknown: "
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, pgdcb.ErrConditionFailed):
		return prefix + "condition failed"
	case errors.Is(err, pgdcb.ErrIdempotent):
		return prefix + "idempotent"
	case errors.As(err, &pgErr):
		return prefix + "SQLSTATE " + pgErr.Code
	case errors.Is(err, context.DeadlineExceeded):
		return prefix + "deadline"
	case errors.Is(err, syscall.ECONNREFUSED):
		return prefix + "connection refused"
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	if len(msg) > 48 {
		msg = msg[:48]
	}
	return prefix + msg
}

// kinds renders a count of errors by kind, most frequent first.
func kinds(errs []error) string {
	n := map[string]int{}
	for _, err := range errs {
		n[errKind(err)]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return n[keys[i]] > n[keys[j]] || (n[keys[i]] == n[keys[j]] && keys[i] < keys[j]) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, n[k])
	}
	return strings.Join(parts, ", ")
}

// attempt is one write and what its caller was told.
type attempt struct {
	id   string // in every event's data ("a"), unique per attempt
	kind string
	n    int     // events
	pos  []int64 // the positions an acknowledged append was told
	out  outcome
	err  error
	at   time.Time // when the call returned
}

// ledger records every attempt, from many goroutines.
type ledger struct {
	mu       sync.Mutex
	attempts []attempt
}

func (l *ledger) add(a attempt) {
	a.out = classify(a.err)
	if a.at.IsZero() {
		a.at = time.Now()
	}
	l.mu.Lock()
	l.attempts = append(l.attempts, a)
	l.mu.Unlock()
}

func (l *ledger) all() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]attempt(nil), l.attempts...)
}

// ackedAfter reports whether an attempt returned without error after t0,
// and how long after t0 the first one did.
func (l *ledger) ackedAfter(t0 time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var first time.Duration
	found := false
	for _, a := range l.attempts {
		if a.out == acked && a.at.After(t0) && (!found || a.at.Sub(t0) < first) {
			first, found = a.at.Sub(t0), true
		}
	}
	return first, found
}

// awaitAcked waits until n attempts returned without error after t0: the
// writers have run for a while, counted in their work rather than slept for
// (a loaded machine may slow them down to nothing in a fixed sleep).
func (l *ledger) awaitAcked(t *testing.T, t0 time.Time, n int) {
	t.Helper()
	await.Until(t, waitTimeout, func() (bool, string) {
		l.mu.Lock()
		k := 0
		for _, a := range l.attempts {
			if a.out == acked && a.at.After(t0) {
				k++
			}
		}
		l.mu.Unlock()
		return k >= n, fmt.Sprintf("%d of %d appends acknowledged", k, n)
	})
}

// has reports whether an attempt recorded so far satisfies pred.
func (l *ledger) has(pred func(a attempt) bool) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, a := range l.attempts {
		if pred(a) {
			return true
		}
	}
	return false
}

// payload is the data of every event the suite writes: the attempt's id, the
// event's index in its batch and, for the counter, its value.
type payload struct {
	A string `json:"a"`
	I int    `json:"i"`
	N int    `json:"n,omitempty"`
}

// batch returns n events of type typ carrying the attempt id.
func batch(typ, id string, n int, tagStrings ...string) []pgdcb.Event {
	ts := tags.MustParseSet(tagStrings...)
	evs := make([]pgdcb.Event, n)
	for i := range evs {
		data, _ := json.Marshal(payload{A: id, I: i})
		evs[i] = pgdcb.Event{Type: typ, Tags: ts, Data: data}
	}
	return evs
}

// The contended boundary: a counter every decision increments by one.
var counterQ = query.Tagged([]string{"Counter"}, "counter=c1")

func counterEvent(id string, n int) []pgdcb.Event {
	data, _ := json.Marshal(payload{A: id, N: n})
	return []pgdcb.Event{{Type: "Counter", Tags: tags.MustParseSet("counter=c1"), Data: data}}
}

// writers run the mixed workload of scenarios 1 and 2 until halted.
type writers struct {
	stop      atomic.Bool
	wg        sync.WaitGroup
	readFails atomic.Int64 // failed decision reads (no append was tried)
}

// startWriters starts n writers on store, recording into led. Each call has
// a 5 s deadline of its own, so halting never cancels a call in flight.
func startWriters(store *eventstore.Store, n int, led *ledger) *writers {
	w := &writers{}
	for i := range n {
		w.wg.Go(func() { w.run(store, i, led) })
	}
	return w
}

func (w *writers) halt() {
	w.stop.Store(true)
	w.wg.Wait()
}

func (w *writers) run(store *eventstore.Store, writer int, led *ledger) {
	rng := rand.New(rand.NewPCG(uint64(writer), uint64(time.Now().UnixNano())))
	wtag := fmt.Sprintf("w=%d", writer)
	for seq := 0; !w.stop.Load(); seq++ {
		id := fmt.Sprintf("w%d-%d", writer, seq)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		a := attempt{id: id}
		var res pgdcb.AppendResult
		switch r := rng.IntN(100); {
		case r < 30:
			a.kind, a.n = "append-1", 1
			res, a.err = store.Append(ctx, batch("One", id, 1, wtag))
		case r < 45:
			a.kind, a.n = "append-100", 100
			res, a.err = store.Append(ctx, batch("Batch", id, 100, wtag))
		case r < 70:
			a.kind, a.n = "appendif-distinct", 1
			acct := "acct=" + id
			res, a.err = store.AppendIf(ctx, batch("Distinct", id, 1, wtag, acct),
				appendif.FailIf(query.Tagged(nil, acct), nil))
		default:
			a.kind, a.n = "appendif-counter", 1
			last, cur, err := store.ReadLast(ctx, counterQ)
			if err != nil {
				cancel()
				w.readFails.Add(1)
				time.Sleep(time.Duration(5+rng.IntN(10)) * time.Millisecond)
				continue
			}
			next := 1
			if last != nil {
				var p payload
				_ = json.Unmarshal(last.Data, &p)
				next = p.N + 1
			}
			res, a.err = store.AppendIf(ctx, counterEvent(id, next), appendif.FailIf(counterQ, &cur))
		}
		a.pos = res.Positions
		cancel()
		led.add(a)
		if a.err != nil {
			time.Sleep(time.Duration(5+rng.IntN(10)) * time.Millisecond)
		}
	}
}

// verdict compares a ledger with the log.
type verdict struct {
	f        figures
	problems []string // examples of violations
	phantom  int      // events of no recorded attempt
}

func (v *verdict) problem(format string, args ...any) {
	if len(v.problems) < 8 {
		v.problems = append(v.problems, fmt.Sprintf(format, args...))
	}
}

// verify reads every event of the env's schema and checks each attempt of
// the ledger against it: an acknowledged attempt is present exactly once and
// whole, a definite failure is absent, an unknown outcome is absent or whole.
func verify(t *testing.T, e *env, led *ledger) verdict {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := e.admin.Query(ctx, `SELECT data->>'a', (data->>'i')::int, count(*), min(position) FROM `+e.quoted+`.events
		WHERE data ? 'a' GROUP BY 1, 2`)
	require.NoError(t, err)
	stored := map[string]map[int]int{}
	positions := map[string]map[int]int64{}
	for rows.Next() {
		var id string
		var i, n int
		var pos int64
		require.NoError(t, rows.Scan(&id, &i, &n, &pos))
		if stored[id] == nil {
			stored[id] = map[int]int{}
			positions[id] = map[int]int64{}
		}
		stored[id][i] = n
		positions[id][i] = pos
	}
	require.NoError(t, rows.Err())

	var v verdict
	known := map[string]bool{}
	for _, a := range led.all() {
		known[a.id] = true
		v.f.Attempts++
		got := stored[a.id]
		dup := false
		for _, n := range got {
			if n > 1 {
				dup = true
			}
		}
		if dup {
			v.f.Duplicated++
			v.problem("%s %s (%v): stored twice", a.kind, a.id, a.err)
		}
		if len(got) > 0 && len(got) < a.n {
			v.f.Partial++
			v.problem("%s %s (%v): %d of %d events stored", a.kind, a.id, a.err, len(got), a.n)
		}
		switch a.out {
		case acked:
			v.f.Acked++
			if len(got) == 0 {
				v.f.Lost++
				v.problem("%s %s: acknowledged, not stored", a.kind, a.id)
			} else if a.pos != nil && !dup && len(got) == a.n {
				// The answer is the log's: event i of the batch at the
				// position the caller was told.
				for i, p := range a.pos {
					if positions[a.id][i] != p || len(a.pos) != a.n {
						v.f.Misreported++
						v.problem("%s %s: told positions %v, event %d stored at %d", a.kind, a.id, a.pos, i, positions[a.id][i])
						break
					}
				}
			}
		case definite:
			v.f.Definite++
			if len(got) > 0 {
				v.f.DefiniteCommitted++
				v.problem("%s %s: failed with a definite error but committed: %v", a.kind, a.id, a.err)
			}
		case unknown:
			v.f.Unknown++
			if len(got) > 0 {
				v.f.UnknownCommitted++
			}
		}
	}
	for id := range stored {
		if !known[id] {
			v.phantom++
			v.problem("events of attempt %s, which no writer recorded", id)
		}
	}
	return v
}

// requireClean fails the test on any violation in v.
func requireClean(t *testing.T, v verdict) {
	t.Helper()
	msg := strings.Join(v.problems, "\n")
	require.Zero(t, v.f.Lost, "acknowledged appends lost:\n%s", msg)
	require.Zero(t, v.f.Duplicated, "appends stored twice:\n%s", msg)
	require.Zero(t, v.f.Partial, "partial batches:\n%s", msg)
	require.Zero(t, v.f.DefiniteCommitted, "definite errors whose write committed (the error should match pgdcb.ErrOutcomeUnknown):\n%s", msg)
	require.Zero(t, v.f.Misreported, "acknowledged appends told other positions than the log's:\n%s", msg)
	require.Zero(t, v.phantom, "events nobody wrote:\n%s", msg)
}

// requireCounter checks the contended boundary: the committed counter values,
// in log order, are 1..k without gap or repeat (no lost decision). It
// returns k.
func requireCounter(t *testing.T, e *env) int {
	t.Helper()
	rows, err := e.admin.Query(context.Background(), `SELECT (data->>'n')::int FROM `+e.quoted+`.events
		WHERE type = 'Counter' ORDER BY transaction_id, position`)
	require.NoError(t, err)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int])
	require.NoError(t, err)
	require.NoError(t, checkCounter(got), "counter decisions lost or repeated")
	return len(got)
}

// checkCounter says where values, in log order, differ from 1, 2, 3, ….
func checkCounter(values []int) error {
	for i, n := range values {
		if n != i+1 {
			return fmt.Errorf("value %d at place %d of %v", n, i+1, values)
		}
	}
	return nil
}

// errorsOf returns the errors of the ledger's failed attempts.
func errorsOf(as []attempt) []error {
	var errs []error
	for _, a := range as {
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	return errs
}
