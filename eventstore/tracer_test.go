package eventstore_test

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// recorder is a Tracer that records every End, and checks that each End
// gets the context its Start returned.
type recorder struct {
	mu      sync.Mutex
	appends []eventstore.TraceAppendEndData
	starts  []eventstore.TraceAppendStartData
	reads   []eventstore.TraceReadEndData
	open    int
	lost    int // Ends without their Start's context
}

func (r *recorder) TraceAppendStart(ctx context.Context, d eventstore.TraceAppendStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open++
	r.starts = append(r.starts, d)
	return context.WithValue(ctx, r, r) // a key of its own
}

func (r *recorder) TraceAppendEnd(ctx context.Context, d eventstore.TraceAppendEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	if ctx.Value(r) != r {
		r.lost++
	}
	r.appends = append(r.appends, d)
}

func (r *recorder) TraceReadStart(ctx context.Context, _ eventstore.TraceReadStartData) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open++
	return context.WithValue(ctx, r, r) // a key of its own
}

func (r *recorder) TraceReadEnd(ctx context.Context, d eventstore.TraceReadEndData) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.open--
	if ctx.Value(r) != r {
		r.lost++
	}
	r.reads = append(r.reads, d)
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.appends, r.starts, r.reads = nil, nil, nil
}

func (r *recorder) check(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	require.Zero(t, r.open, "every Start has its End")
	require.Zero(t, r.lost, "every End gets its Start's context")
}

// The …Tx forms, a broken-off Read, a Read iterated twice, ReadLast and
// ReadTail are traced once each, with what only the store knows.
func TestTracerCalls(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := &recorder{}
	s, pool := newStore(t, &eventstore.Config{Tracer: r})
	q := query.Tagged(nil, "t=1")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = s.AppendTx(ctx, tx, []pgdcb.Event{pgdcb.MustEvent("A", nil, "t=1"), pgdcb.MustEvent("A", nil, "t=1")})
	require.NoError(t, err)
	require.NoError(t, eventstore.CommitTx(ctx, tx))
	require.Len(t, r.appends, 1)
	require.True(t, r.starts[0].InTx)
	require.Nil(t, r.starts[0].Condition)
	require.Equal(t, eventstore.OutcomeCommitted, r.appends[0].Outcome)
	require.Equal(t, 2, r.appends[0].Events)
	require.Len(t, r.appends[0].Result.Positions, 2)
	require.False(t, r.appends[0].Grouped)
	require.Positive(t, r.appends[0].Duration)

	es := s.Read(ctx, q, nil)
	require.Empty(t, r.reads, "a Read is traced when it is iterated")
	for _, err := range es.All() {
		require.NoError(t, err)
		break
	}
	_, ok := es.Cursor()
	require.False(t, ok)
	for _, err := range es.All() {
		require.Error(t, err, "iterated twice")
	}
	require.Len(t, r.reads, 1)
	require.Equal(t, eventstore.TraceReadEndData{Op: eventstore.ReadOpRead, Outcome: eventstore.OutcomeOK,
		Events: 1, Duration: r.reads[0].Duration}, r.reads[0])

	r.reset()
	_, c, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.False(t, c.IsStart(), "the traced read still gives its cursor")
	last, _, err := s.ReadLast(ctx, q)
	require.NoError(t, err)
	require.NotNil(t, last)
	_, err = s.ReadTail(ctx, q, cursor.Start, -1)
	require.Error(t, err)
	require.Len(t, r.reads, 3)
	require.Equal(t, eventstore.ReadOpRead, r.reads[0].Op)
	require.Equal(t, 2, r.reads[0].Events)
	require.Equal(t, eventstore.ReadOpReadLast, r.reads[1].Op)
	require.Equal(t, 1, r.reads[1].Events)
	require.Equal(t, eventstore.ReadOpReadTail, r.reads[2].Op)
	require.Equal(t, eventstore.OutcomeInvalid, r.reads[2].Outcome)

	r.check(t)
}

// With group commit, appends sent together say so, with their group's size.
func TestTracerGrouped(t *testing.T) {
	ctx := context.Background()
	r := &recorder{}
	base, pool := newStore(t, nil)
	// Group commit on whatever PGDCB_TEST_GROUP_COMMIT says.
	s, err := eventstore.New(pool, &eventstore.Config{Schema: base.Schema(), Tracer: r})
	require.NoError(t, err)
	grouped := func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range r.appends {
			require.Equal(t, a.Grouped, a.GroupSize > 0)
			if a.Grouped {
				require.GreaterOrEqual(t, a.GroupSize, 2)
				return true
			}
		}
		return false
	}
	for round := 0; round < 20 && !grouped(); round++ {
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("G", nil, "g=1")})
				require.NoError(t, err)
			})
		}
		wg.Wait()
	}
	require.True(t, grouped(), "16 concurrent appends, 20 times, were never grouped")
	require.Positive(t, s.GroupStats().Groups)
	r.check(t)
}

// MultiTracer calls every tracer, each on its own context.
func TestMultiTracer(t *testing.T) {
	t.Parallel()
	a, b := &recorder{}, &recorder{}
	s, _ := newStore(t, &eventstore.Config{Tracer: eventstore.MultiTracer(a, nil, b)})
	_, err := s.Append(context.Background(), []pgdcb.Event{pgdcb.MustEvent("A", nil)})
	require.NoError(t, err)
	_, err = s.Head(context.Background())
	require.NoError(t, err)
	for _, r := range []*recorder{a, b} {
		require.Len(t, r.appends, 1)
		require.Len(t, r.reads, 1)
		require.Equal(t, eventstore.ReadOpHead, r.reads[0].Op)
	}
	a.check(t)
	b.check(t)
}

// The core store and everything below it import no metrics, tracing or
// messaging library: adapters (pgdcbprom, pgdcbotel) bring those.
func TestCoreImportsNoObservabilityLibrary(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/pgdcb/pgdcb/eventstore").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "github.com/jackc/pgx/v5\n", "the list is the store's dependencies")
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/nats-io/", "github.com/testcontainers/"} {
			require.False(t, strings.HasPrefix(dep, banned), "eventstore depends on %s", dep)
		}
	}
}
