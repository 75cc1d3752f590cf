// Package racecheck holds what the concurrency tests of the stores share:
// racing writers that really overlap, counting their outcomes, and the log
// replay that proves no committed decision missed an event. Package
// eventstore/conformance runs them on any store; eventstore's own tests on
// PostgreSQL.
package racecheck

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// Race runs n racers; each decides, waits until all have decided, then
// acts, so the appends really overlap. Racers never touch t.
func Race(n int, decide func(i int) func() error) []error {
	var (
		ready sync.WaitGroup
		done  sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			act := decide(i)
			ready.Done()
			<-start
			errs[i] = act()
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return errs
}

// Outcomes counts successes, failed conditions and idempotent refusals; any
// other error fails t.
func Outcomes(t testing.TB, errs []error) (ok, conflict, idem int) {
	t.Helper()
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, pgdcb.ErrConditionFailed):
			conflict++
		case errors.Is(err, pgdcb.ErrIdempotent):
			idem++
		default:
			require.NoError(t, err, "unexpected error from a racer")
		}
	}
	return
}

// DecisionRecord is stored in each conditional event: the cursor it decided
// at.
type DecisionRecord struct {
	Cursor string `json:"cursor"`
}

// VerifyNoLostDecision replays the log: for every committed conditional
// event E (one carrying a DecisionRecord) every event matching q that E's
// cursor did not see must sort after E in log order, i.e. must have been
// appended after E committed. It returns how many conditional events it
// checked.
func VerifyNoLostDecision(t testing.TB, s pgdcb.Store, q query.Query) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), q, nil)
	require.NoError(t, err)
	checked := 0
	for _, e := range evs {
		var rec DecisionRecord
		if json.Unmarshal(e.Data, &rec) != nil || rec.Cursor == "" {
			continue
		}
		cur, err := cursor.Parse(rec.Cursor)
		require.NoError(t, err)
		checked++
		for _, f := range evs {
			if f.Position == e.Position || cur.Seen(f.TransactionID, f.Position) {
				continue
			}
			require.Positive(t, cursor.Compare(f.TransactionID, f.Position, e.TransactionID, e.Position),
				"conditional event %d committed over event %d that its decision did not see", e.Position, f.Position)
		}
	}
	return checked
}
