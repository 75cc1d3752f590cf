package commands_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/pgdcbtest"
	"github.com/pgdcb/pgdcb/query"
)

// newStore returns a store in a fresh schema, dropped when the test ends.
func newStore(t testing.TB) *eventstore.Store {
	t.Helper()
	return pgdcbtest.NewStore(t, &pgdcbtest.Options{OwnPool: true})
}

func newExecutor(t testing.TB, cfg *commands.Config) (*commands.Executor, *eventstore.Store) {
	t.Helper()
	s := newStore(t)
	ex, err := commands.New(s, cfg)
	require.NoError(t, err)
	return ex, s
}

// backend is a store the executor runs on: the scenarios that hold on every
// store run on each (see onEachStore).
type backend struct {
	name string
	// postgres is true for eventstore.Store, which has the commands table
	// (tracing, zero-event commands remembered).
	postgres    bool
	newExecutor func(t testing.TB, cfg *commands.Config) (*commands.Executor, pgdcb.Store)
}

var backends = []backend{
	{"memory", false, func(t testing.TB, cfg *commands.Config) (*commands.Executor, pgdcb.Store) {
		return newMemExecutor(t, cfg)
	}},
	{"postgres", true, func(t testing.TB, cfg *commands.Config) (*commands.Executor, pgdcb.Store) {
		return newExecutor(t, cfg)
	}},
}

// onEachStore runs f as a subtest on each backend.
func onEachStore(t *testing.T, f func(t *testing.T, b backend)) {
	t.Helper()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

var errLimit = errors.New("counter: limit reached")

// counterQuery selects one counter's events.
func counterQuery(id string) query.Query {
	return query.Tagged([]string{"Incremented"}, "counter="+id)
}

// increment is a handler: add one to a counter unless it reached limit.
func increment(id string, limit int) commands.HandlerFunc {
	return func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		m := pgdcb.NewModel(counterQuery(id), 0, func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
		cond, err := dc.Project(ctx, m)
		if err != nil {
			return nil, cond, err
		}
		if m.State >= limit {
			return nil, cond, errLimit
		}
		ev, err := pgdcb.NewEvent("Incremented", map[string]int{"n": m.State + 1}, "counter="+id)
		return []pgdcb.Event{ev}, cond, err
	}
}

func countEvents(t testing.TB, s pgdcb.Store, q query.Query) int {
	t.Helper()
	evs, _, err := s.ReadAll(context.Background(), q, nil)
	require.NoError(t, err)
	return len(evs)
}

func cmd(typ string, h commands.Handler) commands.Command {
	return commands.Command{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"t":%q}`, typ)), Handler: h}
}
