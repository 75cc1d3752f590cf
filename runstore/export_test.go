package runstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Test hooks: what the tests of package runstore_test reach of the
// package's unexported names.

// Marker is the metadata every run event carries.
const Marker = marker

// SetBeforeResync makes the projector call f before each resync, with the
// runs it rebuilds, while they are marked STALE.
func SetBeforeResync(s *Store, f func([]StaleRun)) { s.proj.beforeResync = f }

// UnreflectedSQL is CatchUp's check, for the test that reads its plan.
func UnreflectedSQL(s *Store) string { return s.sql.unreflected }

// EventStore is the store's event store.
func (s *Store) EventStore() *eventstore.Store { return s.es }

// Defaults, tag keys, statuses and STALE reasons.
const (
	DefaultFetchLimit    = defaultFetchLimit
	DefaultMaxFetchLimit = defaultMaxFetchLimit
	DefaultProjectorName = defaultProjectorName

	TagRunID          = tagRunID
	TagIdempotencyKey = tagIdempotencyKey

	StatusRunning   = statusRunning
	StatusCompleted = statusCompleted

	StaleGap  = staleGap
	StaleFill = staleFill
	StaleLag  = staleLag
)

// The snapshot bookkeeping.
type (
	Observation = observation
	SeqRange    = seqRange
)

const (
	ObservedNext = observedNext
	ObservedHeld = observedHeld
	ObservedGap  = observedGap
	ObservedFill = observedFill
)

var (
	NewSnapshot    = newSnapshot
	DefaultReducer = defaultReducer
	ValidateFetch  = validateFetch
	ValidateRunID  = validateRunID
)

func (snap *RunSnapshot) Observe(ev CanonicalEngineEvent, r reducer) Observation {
	return snap.observe(ev, r)
}

func (snap *RunSnapshot) Fold(ev CanonicalEngineEvent, r reducer) bool { return snap.fold(ev, r) }

// ValidateEvent is AppendEvent's input validation without the size check: ev
// normalised, or a *ValidationError naming the contract's field.
func ValidateEvent(ev CanonicalEngineEvent) (CanonicalEngineEvent, error) {
	ev, _, err := prepare(ev)
	return ev, err
}

// Migrations are runstore's steps in version order.
func Migrations() []pgdcbsql.Migration { return line().Steps }

// CheckCurrent checks the schema's core and runstore lines, without a Store.
func CheckCurrent(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	q, err := pgdcbsql.Quote(schema)
	if err != nil {
		return err
	}
	if err := pgdcbsql.CheckCurrent(ctx, pool, schema); err != nil {
		return err
	}
	return line().CheckCurrent(ctx, pool, schema, q)
}
