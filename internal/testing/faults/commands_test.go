package faults_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// deposit is the command of scenario 5: k Deposited events on an account,
// decided from the account's events (so that concurrent commands on one
// account conflict and are retried by the executor).
type deposit struct {
	Acct string `json:"acct"`
	K    int    `json:"k"`
}

var depositHandler = commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
	var d deposit
	if err := json.Unmarshal(dc.Command.Data, &d); err != nil {
		return nil, appendif.Condition{}, err
	}
	acct := "acct=" + d.Acct
	seen := pgdcb.NewModel(query.Tagged([]string{"Deposited"}, acct), 0,
		func(n int, _ pgdcb.StoredEvent) int { return n + 1 })
	cond, err := dc.Project(ctx, seen)
	if err != nil {
		return nil, appendif.Condition{}, err
	}
	evs := make([]pgdcb.Event, d.K)
	for i := range evs {
		data, _ := json.Marshal(map[string]any{"i": i, "seen": seen.State})
		evs[i] = pgdcb.Event{Type: "Deposited", Tags: tags.MustParseSet(acct), Data: data}
	}
	return evs, cond, nil
})

// probeHandler is depositHandler whose first decision, after its first read,
// waits for the crash and then reads again: that read fails, and Decide
// returns the store's error.
func probeHandler(reading chan<- struct{}, crashed <-chan struct{}) commands.Handler {
	var first atomic.Bool
	return commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		evs, cond, err := depositHandler(ctx, dc)
		if err != nil || first.Swap(true) {
			return evs, cond, err
		}
		close(reading)
		<-crashed
		if _, _, err := dc.ReadLast(ctx, query.Tagged([]string{"Deposited"})); err != nil {
			return nil, appendif.Condition{}, err
		}
		return evs, cond, nil
	})
}

// Scenario 5. Four callers run deposit commands, each with a command id,
// retrying a failed call with the same command until it succeeds, while the
// server is crashed once (with commits held before the crash, so that some
// commands commit without their caller knowing, see holdCommits). A fifth
// caller's command is in the middle of its decision when the server crashes
// (see probeHandler). Each command's events are present exactly once and
// whole, its commands row once; no infrastructure failure comes back as a
// business rejection (*commands.RejectedError): the handler never rejects.
func TestCommandsAcrossCrash(t *testing.T) {
	s := cluster(t)
	began := time.Now()
	e := newEnv(t)
	store := e.store(t, newPool(t, "faults_cmd", 8, nil), nil)
	ex, err := commands.New(store, &commands.Config{MaxAttempts: 50})
	require.NoError(t, err)

	type done struct {
		id        uuid.UUID
		k         int
		duplicate bool
		attempts  int
	}
	var (
		mu       sync.Mutex
		finished []done
		errs     []error
		calls    atomic.Int64
		rejected atomic.Int64
		gaveUp   atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	reading, crashed := make(chan struct{}), make(chan struct{})
	probe := probeHandler(reading, crashed)
	for w := range 5 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for !stop.Load() {
				d := deposit{Acct: fmt.Sprint("a", rng.IntN(2)), K: 1 + rng.IntN(3)}
				data, _ := json.Marshal(d)
				cmd := commands.Command{ID: uuid.New(), Type: "Deposit", Data: data, Handler: depositHandler}
				if w == 4 {
					cmd.Handler = probe
				}
				ok, _ := await.Within(30*time.Second, func() (bool, string) { // the command again until it finishes
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					out, err := ex.Execute(ctx, cmd)
					cancel()
					calls.Add(1)
					if err == nil {
						mu.Lock()
						finished = append(finished, done{id: cmd.ID, k: d.K, duplicate: out.Duplicate, attempts: out.Attempts})
						mu.Unlock()
						return true, ""
					}
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					var rej *commands.RejectedError
					if errors.As(err, &rej) {
						rejected.Add(1)
					}
					return false, ""
				})
				if !ok {
					gaveUp.Add(1)
				}
			}
		})
	}
	defer func() { stop.Store(true); wg.Wait() }()
	// The commands run for a while: counted in finished commands, not slept.
	awaitFinished := func(n int) {
		t.Helper()
		await.Until(t, waitTimeout, func() (bool, string) {
			mu.Lock()
			k := len(finished)
			mu.Unlock()
			return k >= n, fmt.Sprintf("%d of %d commands finished", k, n)
		})
	}

	awaitFinished(20)
	<-reading
	holdCommits(t, e)
	waitUntil(t, "a command's commit held", func() bool {
		var n int
		err := e.admin.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = 'faults_cmd' AND wait_event = 'SyncRep'`).Scan(&n)
		require.NoError(t, err)
		return n > 0
	})
	releaseCommitsAtNextStart(t, e)
	require.NoError(t, s.Crash(t.Context()))
	close(crashed)
	time.Sleep(300 * time.Millisecond)
	restart := time.Now()
	require.NoError(t, s.Start(t.Context()))
	var recovery time.Duration
	require.Eventually(t, func() bool {
		var n int
		err := e.admin.QueryRow(context.Background(), `SELECT count(*) FROM `+e.quoted+`.commands WHERE occurred_at > $1`, restart).Scan(&n)
		if err == nil && n > 0 && recovery == 0 {
			recovery = time.Since(restart)
		}
		return n > 0
	}, 30*time.Second, 10*time.Millisecond, "commands run again after the start")
	mu.Lock()
	before := len(finished)
	mu.Unlock()
	awaitFinished(before + 20)
	stop.Store(true)
	wg.Wait()

	// Every finished command: its events once and whole, one commands row.
	type stored struct{ events, distinct, rows int }
	got := map[uuid.UUID]*stored{}
	rows, err := e.admin.Query(t.Context(), `SELECT substr(t, 12)::uuid, count(*), count(DISTINCT data->>'i')
		FROM `+e.quoted+`.events, unnest(tags) t WHERE t LIKE 'command_id=%' GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		st := &stored{}
		require.NoError(t, rows.Scan(&id, &st.events, &st.distinct))
		got[id] = st
	}
	require.NoError(t, rows.Err())
	rows, err = e.admin.Query(t.Context(), `SELECT command_id, count(*) FROM `+e.quoted+`.commands GROUP BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var id uuid.UUID
		var n int
		require.NoError(t, rows.Scan(&id, &n))
		if got[id] == nil {
			got[id] = &stored{}
		}
		got[id].rows = n
	}
	require.NoError(t, rows.Err())

	f := figures{Scenario: "5 commands across a crash", Attempts: int(calls.Load()), Acked: len(finished)}
	var v verdict
	dups, retried := 0, 0
	known := map[uuid.UUID]bool{}
	for _, d := range finished {
		known[d.id] = true
		if d.duplicate {
			dups++
		}
		if d.attempts > 1 {
			retried++
		}
		st := got[d.id]
		switch {
		case st == nil || st.events == 0:
			f.Lost++
			v.problem("command %s: acknowledged, no events", d.id)
		case st.events != st.distinct || st.rows > 1:
			f.Duplicated++
			v.problem("command %s: %d events (%d distinct), %d commands rows", d.id, st.events, st.distinct, st.rows)
		case st.distinct != d.k:
			f.Partial++
			v.problem("command %s: %d of %d events", d.id, st.distinct, d.k)
		case st.rows != 1:
			f.Lost++
			v.problem("command %s: events but no commands row", d.id)
		}
	}
	for id := range got {
		if !known[id] && gaveUp.Load() == 0 {
			v.phantom++
			v.problem("command %s: stored, never acknowledged", id)
		}
	}
	for _, err := range errs {
		if errors.Is(err, pgdcb.ErrOutcomeUnknown) {
			f.Unknown++
		} else {
			f.Definite++
		}
	}
	f.Recovery = recovery
	f.Elapsed = time.Since(began)
	f.Note = fmt.Sprintf("executions that took more than one attempt (conflicts, unknown outcomes retried by the executor)=%d, caller retries answered with the first outcome (Duplicate)=%d, rejections=%d, gave up=%d; errors: %s",
		retried, dups, rejected.Load(), gaveUp.Load(), kinds(errs))
	record(t, f)
	v.f = f
	requireClean(t, v)
	require.Zero(t, rejected.Load(), "infrastructure failures reported as rejections (*commands.RejectedError); the handler never rejects")
	require.Zero(t, gaveUp.Load(), "commands that never succeeded in 30 s of retries")
	require.Positive(t, f.Definite+f.Unknown, "some calls met the crash")
}
