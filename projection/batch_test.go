package projection_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
)

// Step runs the tail; a logical projection refuses it (it would move the
// tail checkpoint under the slot's), and NewBatchRunner refuses logical mode.
func TestStepRefusesLogicalMode(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	r, err := projection.New(store, "logical-step", query.All(),
		func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil },
		&projection.Config{Logical: &logical.Config{}})
	require.NoError(t, err)
	_, err = r.Step(context.Background())
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.Equal(t, 1, strings.Count(err.Error(), "pgdcb:"), err.Error())

	_, err = projection.NewBatchRunner(store, "logical-batch", query.All(), nopBatch{}, &projection.Config{Logical: &logical.Config{}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.Equal(t, 1, strings.Count(err.Error(), "pgdcb:"), err.Error())
}

type nopBatch struct{}

func (nopBatch) HandleBatch(context.Context, pgx.Tx, pgdcb.TailBatch) error { return nil }

// stepTracer counts the batches a Tracer saw start and end.
type stepTracer struct {
	starts, ends, events atomic.Int64
}

func (st *stepTracer) TraceBatchStart(ctx context.Context, _ subscription.TraceBatchData) context.Context {
	st.starts.Add(1)
	return ctx
}

func (st *stepTracer) TraceBatchEnd(_ context.Context, d subscription.TraceBatchData) {
	st.ends.Add(1)
	if d.Committed {
		st.events.Add(int64(d.Events))
	}
}

// TestStepEndsItsBatchTrace: a batch that Step runs is traced to its end,
// as one that Run runs (a span left open and a metric never counted, for
// runstore's CatchUp and ProcessBatch, before).
func TestStepEndsItsBatchTrace(t *testing.T) {
	s, _ := newStore(t)
	appendN(t, s, "P", 7, 1)
	tr := &stepTracer{}
	cfg := *fast
	cfg.Tracer = tr
	r, err := projection.New(s, "steptrace", query.Tagged([]string{"P"}),
		func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return nil }, &cfg)
	require.NoError(t, err)
	// Step until the 7 events were handled: an open transaction of a test
	// running beside this one can hold the tail back for a while.
	await.Until(t, wait, func() (bool, string) {
		_, err := r.Step(context.Background())
		require.NoError(t, err)
		n := tr.events.Load()
		return n >= 7, fmt.Sprintf("%d of 7 events handled", n)
	})
	require.Positive(t, tr.starts.Load())
	require.Equal(t, tr.starts.Load(), tr.ends.Load(), "every traced batch ended")
	require.EqualValues(t, 7, tr.events.Load(), "the committed batches' events")
}
