// Package conformance is the test suite of pgdcb.Store: every
// guarantee of docs/CONCURRENCY.md that can be observed through the API. Any
// implementation runs it from its own tests with
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, func(t *testing.T) pgdcb.Store { return newStore(t) })
//	}
//
// newStore is called once per check and must return an empty store with the
// default limits (eventstore.DefaultMaxBatchSize, DefaultMaxEventBytes,
// DefaultMaxBatchBytes) whose appends wake its listeners. Both the PostgreSQL
// store and package memstore pass it.
//
// The suite checks: appends (one transaction id per append, positions in
// batch order, increasing), reads (log order, backwards, limits, cursors,
// ReadLast, Head, the iterator), conditions (unseen events fail the append,
// seen ones do not, OR-ed items, limited reads, Project's union), idempotency
// (the query, checked first over the whole log; event ids, and the id an
// append gives its first event when it has none), the races (N
// writers on one boundary: exactly one wins; overlapping conditions;
// multi-item conditions and mixed writers, replayed so that no committed
// decision missed an event; the idempotency race: exactly one), tailing
// (pages in log order, each event once, cursors that cover their page and
// stay on an event, usable as an AppendIf After), wake-ups (Listen), bad
// input (typed errors, nothing written), erasure (fields marked
// pgdcb.Personal read as null after Erase, the rest intact; skipped for a
// store without Erase, which must then have what a PostgreSQL store needs
// to seal: eventstore.Config.KEK); with Options.WithUpcasters, upcasting
// (package upcast).
package conformance

import (
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/upcast"
)

// Options tune the suite; nil means defaults.
type Options struct {
	// Rounds is how many times each race repeats. Default 10.
	Rounds int
	// Racers is the number of concurrent writers in a race. Default 16.
	Racers int
	// WithUpcasters, when set, returns an empty store reading through reg
	// (eventstore.Config.Upcasters): the suite then checks upcasting too
	// (old shapes and renamed types on every read, conditions across a
	// rename under a race of 32 writers, bad upcasters failing loudly).
	WithUpcasters func(t testing.TB, reg *upcast.Registry) pgdcb.Store
}

func (o *Options) withDefaults() Options {
	var c Options
	if o != nil {
		c = *o
	}
	if c.Rounds <= 0 {
		c.Rounds = 10
	}
	if c.Racers <= 0 {
		c.Racers = 16
	}
	return c
}

// Check is one check of the suite, runnable on its own with any testing.TB.
type Check struct {
	// Name names the check (the subtest's name in Run).
	Name string
	// Run checks s, which must be empty, failing t when s breaks a
	// guarantee. It calls t's Fatal methods only from the goroutine it runs
	// on.
	Run func(t testing.TB, s pgdcb.Store)
}

// Checks returns the suite's checks with the options applied.
func Checks(opts *Options) []Check {
	o := opts.withDefaults()
	with := func(f func(testing.TB, pgdcb.Store, Options)) func(testing.TB, pgdcb.Store) {
		return func(t testing.TB, s pgdcb.Store) { f(t, s, o) }
	}
	checks := []Check{
		{"AppendPositionsAndTransactions", with(testAppendPositions)},
		{"ReadOptions", with(testReadOptions)},
		{"ReadIterator", with(testReadIterator)},
		{"JSONReadBackInJSONBForm", with(testJSONForm)},
		{"HeadAndReadLast", with(testHeadAndReadLast)},
		{"ConditionUnseenEventFails", with(testConditionUnseen)},
		{"ConditionItemsAreORed", with(testConditionItemsORed)},
		{"LimitedReadCursorConflicts", with(testLimitedReadCursor)},
		{"ProjectUnionAndDispatch", with(testProject)},
		{"ProjectSnapshotModelSameResult", with(testProjectSnapshotModel)},
		{"IdempotencyQuery", with(testIdempotencyQuery)},
		{"EventIDIdempotency", with(testEventID)},
		{"GeneratedEventIDs", with(testGeneratedEventIDs)},
		{"RaceExactlyOneWinner", with(testRaceExactlyOne)},
		{"RaceOverlappingConditions", with(testRaceOverlapping)},
		{"RaceMultiItemCondition", with(testRaceMultiItem)},
		{"RaceMixedWriters", with(testRaceMixedWriters)},
		{"RaceIdempotency", with(testRaceIdempotency)},
		{"TailPagesInLogOrder", with(testTailPages)},
		{"TailFullPageHeadIsLogHead", with(testTailFullPageHead)},
		{"TailCursorAsCondition", with(testTailCursorAsCondition)},
		{"ListenWakesAfterAppend", with(testListen)},
		{"BadEventsRefusedNothingWritten", with(testBadEvents)},
		{"BadQueriesAndLimits", with(testBadQueries)},
		{"SizeLimits", with(testSizeLimits)},
		{"EndedContext", with(testEndedContext)},
		{"ErasureRedactsOnlyTheSubject", with(testErasure)},
	}
	if up := o.WithUpcasters; up != nil {
		checks = append(checks,
			Check{"UpcastEveryRead", func(t testing.TB, _ pgdcb.Store) { testUpcasting(t, up) }},
			Check{"UpcastFailsLoudly", func(t testing.TB, _ pgdcb.Store) { testUpcastFailsLoudly(t, up) }},
			Check{"UpcastRenameRaceExactlyOne", func(t testing.TB, _ pgdcb.Store) { testUpcastRenameRace(t, up, o) }},
		)
	}
	return checks
}

// Run runs the suite with default options.
func Run(t *testing.T, newStore func(t *testing.T) pgdcb.Store) {
	RunWithOptions(t, newStore, nil)
}

// RunWithOptions runs every check as a subtest on a store of its own.
func RunWithOptions(t *testing.T, newStore func(t *testing.T) pgdcb.Store, opts *Options) {
	for _, c := range Checks(opts) {
		t.Run(c.Name, func(t *testing.T) { c.Run(t, newStore(t)) })
	}
}
