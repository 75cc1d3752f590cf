package runstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	"github.com/pgdcb/pgdcb/runstore/conformance"
	"github.com/pgdcb/pgdcb/tags"
)

// seqBackend is a second backend of the contract, of the kind seed 002
// describes: its append authority is a sequence per run (the contract's
// "database sequence per runId", here a counter in the process) taken before
// the append commits, with no lock held between the two. Concurrent writers
// commit out of runSeq order, so readers see gaps that fill later, and a
// duplicate burns a number (a gap that never fills). Idempotency is the
// event store's idempotency query. Reads, snapshots and the projector are
// runstore.Store's; validation and bookkeeping are the exported helpers.
type seqBackend struct {
	*runstore.Store
	mu   sync.Mutex
	next map[string]int64
}

func (b *seqBackend) take(runID string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.next[runID]++
	return b.next[runID]
}

func (b *seqBackend) AppendEvent(ctx context.Context, ev runstore.CanonicalEngineEvent) (runstore.AppendResult, error) {
	ev, err := runstore.ValidateEvent(ev)
	if err != nil {
		return runstore.AppendResult{}, err
	}
	ev.RunSeq = b.take(ev.RunID)
	time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond) // commits late, sometimes after runSeq+1
	idem := query.Tagged(nil, runstore.TagRunID+"="+ev.RunID, runstore.TagIdempotencyKey+"="+ev.IdempotencyKey)
	_, err = b.EventStore().AppendIf(ctx, []pgdcb.Event{rawRunEvent(ev)}, appendif.Condition{}.WithIdempotency(idem))
	switch {
	case errors.Is(err, pgdcb.ErrIdempotent):
		evs, _, err := b.EventStore().ReadAll(ctx, idem, nil)
		if err != nil || len(evs) == 0 {
			return runstore.AppendResult{}, errors.Join(errors.New("seqBackend: duplicate not found"), err)
		}
		var stored runstore.CanonicalEngineEvent
		if err := json.Unmarshal(evs[0].Data, &stored); err != nil {
			return runstore.AppendResult{}, err
		}
		return runstore.AppendResult{RunSeq: stored.RunSeq, Idempotent: true}, nil
	case err != nil:
		return runstore.AppendResult{}, err
	}
	return runstore.AppendResult{RunSeq: ev.RunSeq, Persisted: true}, nil
}

func (b *seqBackend) writeAt(t *testing.T, ev runstore.CanonicalEngineEvent) {
	b.mu.Lock()
	b.next[ev.RunID] = max(b.next[ev.RunID], ev.RunSeq)
	b.mu.Unlock()
	writeRunEventAt(t, b.EventStore(), ev)
}

// rawRunEvent is the event store row of a run event (the row AppendEvent
// writes).
func rawRunEvent(ev runstore.CanonicalEngineEvent) pgdcb.Event {
	ts, err := tags.NewSet(tags.Must(runstore.TagRunID, ev.RunID), tags.Must(runstore.TagIdempotencyKey, ev.IdempotencyKey))
	if err != nil {
		panic(err)
	}
	data, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return pgdcb.Event{Type: ev.EventType, Tags: ts, Data: data, Metadata: []byte(`{"runstore": "v1"}`)}
}

// The conformance suite with MayShowGaps on a backend that does show gaps
// filling later: the watermark reader goes STALE and resyncs, and the
// projector's snapshots follow through their resyncs (GetSnapshot =
// ProjectSnapshot after CatchUp).
func TestConformanceSequenceBackendWithGaps(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		resyncs = map[string]float64{}
	)
	conformance.RunWithOptions(t, func(t *testing.T) runstore.StateStore {
		b := &seqBackend{Store: newStore(t, nil), next: map[string]int64{}}
		reg := registry(b.Store)
		t.Cleanup(func() { // before the pool closes
			stale, err := b.StaleRuns(context.Background())
			require.NoError(t, err)
			require.Empty(t, stale, "every resync finished")
			mu.Lock()
			defer mu.Unlock()
			for trigger, n := range reg.resyncs() {
				resyncs[t.Name()+"/"+trigger] += n
			}
		})
		return b
	}, &conformance.Options{Rounds: 2, MayShowGaps: true,
		WriteAt: func(t *testing.T, s runstore.StateStore, ev runstore.CanonicalEngineEvent) {
			s.(*seqBackend).writeAt(t, ev)
		}})
	t.Logf("resyncs: %v", resyncs)
	prefix := t.Name() + "/Resync/"
	require.Equal(t, 1.0, resyncs[prefix+runstore.StaleGap], "the Resync test's gap")
	require.Equal(t, 1.0, resyncs[prefix+runstore.StaleFill], "the Resync test's fill")
}
