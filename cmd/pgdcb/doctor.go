package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/effects"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// doctorJSON is `pgdcb doctor -json`: one object, each section present when
// it could be read (the schema always).
type doctorJSON struct {
	Schema   doctorSchemaJSON   `json:"schema"`
	Head     *doctorHeadJSON    `json:"head,omitempty"`
	Horizon  *doctorHorizonJSON `json:"horizon,omitempty"`
	Readers  []doctorReaderJSON `json:"readers"`
	Effects  *doctorEffectsJSON `json:"effects,omitempty"`
	Runstore *doctorRunsJSON    `json:"runstore,omitempty"`
	// Problems lists what needs an operator, one sentence each; empty when
	// nothing does.
	Problems []string `json:"problems"`
}

type doctorSchemaJSON struct {
	Name           string `json:"name"`
	Version        int    `json:"version"` // the newest applied migration; 0: none
	LatestVersion  int    `json:"latest_version"`
	Pending        []int  `json:"pending"`
	Current        bool   `json:"current"`
	Error          string `json:"error,omitempty"`
	TransactionIDs string `json:"transaction_ids,omitempty"` // set when the log's ids are ahead of the server
}

type doctorHeadJSON struct {
	Cursor        string `json:"cursor"`
	TransactionID uint64 `json:"transaction_id"`
	Position      int64  `json:"position"`
	LastEventAt   string `json:"last_event_at,omitempty"`
}

type doctorHorizonJSON struct {
	// XMin is the oldest transaction id still running in the cluster; tailing
	// readers wait only for the running transactions of the store's database.
	XMin uint64 `json:"xmin"`
	// Delaying: the log holds events at or past XMin, which readers wait for.
	Delaying bool `json:"delaying"`
	// Holder is the transaction whose id is XMin, when one runs.
	Holder *doctorXactJSON `json:"holder,omitempty"`
	// Transactions: every transaction of the cluster holding a transaction
	// id, oldest first (each holds the horizon once the older ones end).
	Transactions []doctorXactJSON `json:"transactions"`
}

type doctorXactJSON struct {
	PID      int     `json:"pid,omitempty"`      // 0 for a prepared transaction
	Prepared string  `json:"prepared,omitempty"` // its gid
	XID      uint64  `json:"xid"`
	Database string  `json:"database"`
	User     string  `json:"user"`
	App      string  `json:"application,omitempty"`
	Client   string  `json:"client,omitempty"`
	State    string  `json:"state,omitempty"`
	Age      float64 `json:"age_seconds"` // since the transaction started
	Start    string  `json:"xact_start"`
	QueryAt  string  `json:"query_start,omitempty"`
	Query    string  `json:"query,omitempty"` // the last statement, cut to 200 bytes
}

type doctorReaderJSON struct {
	Name        string  `json:"name"`
	Kind        string  `json:"kind"` // projection or outbox
	State       string  `json:"state"`
	Cursor      string  `json:"cursor"`
	LagEvents   int64   `json:"lag_events"`
	LagSeconds  float64 `json:"lag_seconds"` // age of the oldest event past the checkpoint; 0 when none
	ErrorCount  int     `json:"error_count"`
	LastError   string  `json:"last_error,omitempty"`
	Leader      string  `json:"leader,omitempty"`
	HeartbeatAt string  `json:"heartbeat_at,omitempty"`
}

type doctorEffectsJSON struct {
	Pending, Executing, Completed, Failed int
}

type doctorRunsJSON struct {
	LagSeconds float64 `json:"lag_seconds"`
	LagHigh    bool    `json:"lag_high"`
	StaleRuns  int     `json:"stale_runs"`
}

var doctorCmd = &command{
	name: "doctor", summary: "one screen for an operator: schema, readers and their lag, the transaction holding the horizon, outbox, effects, run snapshots",
	detail: `Reads only. Sections: the schema (applied and pending migrations); the head
of the log; the horizon: the oldest transaction running in the cluster (tailing
readers, i.e. subscriptions, projections and the outbox, stop only at those of
the store's database), with its pid, database, age, state and last statement, and every other
transaction holding an id; readers (the checkpoints: projections and outbox
relays) with state, lag in events and seconds, errors and leader; effects by
state; run snapshots' lag and STALE runs. Seeing other roles' sessions fully
needs pg_read_all_stats. Exit 3 when the schema needs attention (as status).
`,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		fx := fs.Bool("effects", true, "count effects by state (folds every effect event)")
		return func(e *env) error {
			d, err := diagnose(e, *fx)
			if err != nil {
				return err
			}
			if e.json {
				if err := e.writeJSON(d); err != nil {
					return err
				}
			} else if err := d.print(e.stdout); err != nil {
				return err
			}
			if len(d.Schema.Pending) > 0 || d.Schema.Error != "" || d.Schema.TransactionIDs != "" {
				return fmt.Errorf("%w: see doctor's schema section", errSchemaAttention)
			}
			return nil
		}
	},
}

// diagnose reads what doctor shows; the sections past the schema need a
// current schema.
func diagnose(e *env, withEffects bool) (*doctorJSON, error) {
	d := &doctorJSON{Readers: []doctorReaderJSON{}, Problems: []string{}}
	d.Schema = doctorSchemaJSON{Name: e.schema, LatestVersion: pgdcbsql.LatestVersion(), Pending: []int{}}
	st, err := pgdcbsql.Status(e.ctx, e.pool, e.schema)
	if err != nil {
		return nil, errfmt.Wrap("migrations", err)
	}
	for _, s := range st {
		if s.Applied {
			d.Schema.Version = max(d.Schema.Version, s.Version)
		} else {
			d.Schema.Pending = append(d.Schema.Pending, s.Version)
		}
	}
	if len(d.Schema.Pending) > 0 {
		d.problem("%d migration(s) pending %v: run 'pgdcb migrate'", len(d.Schema.Pending), d.Schema.Pending)
	}
	horizon, err := readHorizon(e)
	if err != nil {
		return nil, err
	}
	d.Horizon = horizon
	if err := pgdcbsql.CheckCurrent(e.ctx, e.pool, e.schema); err != nil {
		d.Schema.Error = message(err)
		if len(d.Schema.Pending) == 0 {
			d.problem("schema check: %s", d.Schema.Error)
		}
		return d, nil
	}
	d.Schema.Current = true
	if err := pgdcbsql.CheckTransactionIDs(e.ctx, e.pool, e.schema); err != nil {
		var ahead *pgdcbsql.TransactionIDsAheadError
		if !errors.As(err, &ahead) {
			return nil, errfmt.Wrap("check transaction ids", err)
		}
		d.Schema.TransactionIDs = message(err)
		d.problem("transaction ids: %s", d.Schema.TransactionIDs)
	}

	store, err := eventstore.New(e.pool, &eventstore.Config{Schema: e.schema, NotifyDisabled: true})
	if err != nil {
		return nil, err
	}
	head, err := store.Head(e.ctx)
	if err != nil {
		return nil, errfmt.Wrap("head", err)
	}
	d.Head = &doctorHeadJSON{Cursor: head.String(), TransactionID: head.TransactionID, Position: head.Position}
	last, _, err := store.ReadLast(e.ctx, query.All())
	if err != nil {
		return nil, errfmt.Wrap("last event", err)
	}
	if last != nil {
		d.Head.LastEventAt = timeText(last.OccurredAt)
		// The log holds events the oldest running transaction keeps readers from.
		d.Horizon.Delaying = last.TransactionID >= d.Horizon.XMin
	}
	if h := d.Horizon; h.Delaying && h.Holder != nil {
		d.problem("transaction %d (pid %d, database %s, %s, open %s) holds back every tailing reader",
			h.Holder.XID, h.Holder.PID, h.Holder.Database, h.Holder.State, time.Duration(h.Holder.Age*float64(time.Second)).Round(time.Second))
	}

	if err := d.readReaders(e, store, head); err != nil {
		return nil, err
	}
	if withEffects {
		if err := d.readEffects(e, store); err != nil {
			return nil, err
		}
	}
	if err := d.readRuns(e, store); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *doctorJSON) problem(format string, args ...any) {
	d.Problems = append(d.Problems, fmt.Sprintf(format, args...))
}

// readHorizon reads the cluster's oldest running transaction id and the
// transactions holding ids. pg_stat_activity and pg_prepared_xacts are views
// of shared memory (no index); pg_snapshot_xmin of the current snapshot is the
// horizon tailing reads stop at. doctor's own statement holds no id.
func readHorizon(e *env) (*doctorHorizonJSON, error) {
	h := &doctorHorizonJSON{Transactions: []doctorXactJSON{}}
	var xmin string
	if err := e.pool.QueryRow(e.ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xmin); err != nil {
		return nil, errfmt.Wrap("horizon", err)
	}
	if _, err := fmt.Sscan(xmin, &h.XMin); err != nil {
		return nil, errfmt.Wrap("horizon", err)
	}
	// Backends holding an xid, and prepared transactions, oldest id first
	// (age() of a 32-bit xid is its distance from the next one).
	rows, err := e.pool.Query(e.ctx, `
		SELECT pid, '', backend_xid::text, coalesce(datname, ''), coalesce(usename, ''),
		       coalesce(application_name, ''), coalesce(client_addr::text, ''), coalesce(state, ''),
		       coalesce(extract(epoch FROM clock_timestamp() - xact_start), 0)::float8, xact_start,
		       query_start, coalesce(left(query, 200), ''), age(backend_xid)
		  FROM pg_stat_activity
		 WHERE backend_xid IS NOT NULL
		UNION ALL
		SELECT 0, gid, transaction::text, database, owner, '', '', 'prepared',
		       extract(epoch FROM clock_timestamp() - prepared)::float8, prepared,
		       NULL, '', age(transaction)
		  FROM pg_prepared_xacts
		 ORDER BY 13 DESC`)
	if err != nil {
		return nil, errfmt.Wrap("transactions", err)
	}
	for rows.Next() {
		var x doctorXactJSON
		var xid32 string
		var start, queryAt *time.Time
		var age int64
		if err := rows.Scan(&x.PID, &x.Prepared, &xid32, &x.Database, &x.User, &x.App, &x.Client, &x.State,
			&x.Age, &start, &queryAt, &x.Query, &age); err != nil {
			rows.Close()
			return nil, errfmt.Wrap("transactions", err)
		}
		var epochless uint64
		if _, err := fmt.Sscan(xid32, &epochless); err != nil {
			rows.Close()
			return nil, errfmt.Wrap("transactions", err)
		}
		x.XID = widenXID(epochless, h.XMin)
		if start != nil {
			x.Start = timeText(*start)
		}
		if queryAt != nil {
			x.QueryAt = timeText(*queryAt)
		}
		h.Transactions = append(h.Transactions, x)
	}
	if err := rows.Err(); err != nil {
		return nil, errfmt.Wrap("transactions", err)
	}
	for i := range h.Transactions {
		if h.Transactions[i].XID == h.XMin {
			h.Holder = &h.Transactions[i]
			break
		}
	}
	return h, nil
}

// widenXID gives a 32-bit xid of a running transaction the epoch of the
// 64-bit horizon: running transactions are within 2^31 of it, and at or
// after it.
func widenXID(xid32, horizon uint64) uint64 {
	x := horizon&^0xFFFFFFFF | xid32
	if x < horizon {
		x += 1 << 32
	}
	return x
}

// readReaders reads the checkpoints: projections and outbox relays.
func (d *doctorJSON) readReaders(e *env, store *eventstore.Store, head cursor.Cursor) error {
	list, err := projection.List(e.ctx, store)
	if err != nil {
		return errfmt.Wrap("checkpoints", err)
	}
	events := pgx.Identifier{e.schema, "events"}.Sanitize()
	for _, st := range list {
		r := doctorReaderJSON{Name: st.Name, Kind: "projection", State: string(st.State), Cursor: st.Cursor.String(),
			LagEvents: max(head.Position-st.Cursor.Position, 0), ErrorCount: st.ErrorCount, LastError: st.LastError,
			Leader: st.Leader, HeartbeatAt: timeText(st.HeartbeatAt)}
		if strings.HasPrefix(st.Name, "outbox:") { // outbox.CheckpointName (not imported: it would bring NATS into the CLI)
			r.Kind = "outbox"
		}
		// The first event past the checkpoint in log order: a range scan of
		// events_log_order.
		var age *float64
		err := e.pool.QueryRow(e.ctx, `SELECT extract(epoch FROM clock_timestamp() - occurred_at)::float8 FROM `+events+`
			WHERE (transaction_id, position) > ($1::text::xid8, $2) ORDER BY transaction_id, position LIMIT 1`,
			fmt.Sprint(st.Cursor.TransactionID), st.Cursor.Position).Scan(&age)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return errfmt.Wrap("reader lag", err)
		case age != nil:
			r.LagSeconds = max(*age, 0)
		}
		if st.State == projection.Failed {
			d.problem("%s %s is FAILED after %d attempts: %s (fix the cause, then 'pgdcb projections resume %s')",
				r.Kind, r.Name, r.ErrorCount, r.LastError, r.Name)
		}
		d.Readers = append(d.Readers, r)
	}
	return nil
}

// readEffects counts effects by state, when the log holds any.
func (d *doctorJSON) readEffects(e *env, store *eventstore.Store) error {
	requested, _, err := store.ReadLast(e.ctx, query.Tagged([]string{"effect_requested"}))
	if err != nil {
		return errfmt.Wrap("effects", err)
	}
	if requested == nil {
		return nil
	}
	q, err := effects.New(store, nil)
	if err != nil {
		return errfmt.Wrap("effects", err)
	}
	c, err := q.Counts(e.ctx)
	if err != nil {
		return errfmt.Wrap("effects", err)
	}
	d.Effects = &doctorEffectsJSON{Pending: c.Pending, Executing: c.Executing, Completed: c.Completed, Failed: c.Failed}
	return nil
}

// readRuns reads the run snapshots' lag and STALE runs, when runstore's
// migration line is applied in the schema (a store that does not use
// runstore has no run_snapshots table, and no section).
func (d *doctorJSON) readRuns(e *env, store *eventstore.Store) error {
	st, err := runstore.Status(e.ctx, e.pool, e.schema)
	if err != nil {
		return errfmt.Wrap("runstore migrations", err)
	}
	if !slices.ContainsFunc(st, func(s pgdcbsql.MigrationStatus) bool { return s.Applied }) {
		return nil
	}
	rs, err := runstore.New(store, nil)
	if err != nil {
		return errfmt.Wrap("runstore", err)
	}
	lag, err := rs.SnapshotLag(e.ctx)
	if err != nil {
		return errfmt.Wrap("runstore lag", err)
	}
	stale, err := rs.StaleRuns(e.ctx)
	if err != nil {
		return errfmt.Wrap("runstore stale runs", err)
	}
	d.Runstore = &doctorRunsJSON{LagSeconds: lag.Lag.Seconds(), LagHigh: lag.Alert, StaleRuns: len(stale)}
	if lag.Alert {
		d.problem("run snapshots lag %s (above the contract's threshold): is the snapshot projector running?", lag.Lag.Round(time.Millisecond))
	}
	return nil
}

func (d *doctorJSON) print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	s := d.Schema
	fmt.Fprintf(tw, "SCHEMA\t%s: version %d of %d", s.Name, s.Version, s.LatestVersion)
	if len(s.Pending) > 0 {
		fmt.Fprintf(tw, ", pending %v", s.Pending)
	}
	switch {
	case s.Error != "":
		fmt.Fprintf(tw, "; %s", s.Error)
	case s.Current:
		fmt.Fprint(tw, ", current")
	}
	fmt.Fprintln(tw)
	if d.Head != nil {
		fmt.Fprintf(tw, "HEAD\t%s (transaction %d, position %d), last event %s\n", d.Head.Cursor, d.Head.TransactionID, d.Head.Position, orNone(d.Head.LastEventAt))
	}
	if h := d.Horizon; h != nil {
		fmt.Fprintf(tw, "HORIZON\txmin %d", h.XMin)
		switch {
		case h.Holder != nil:
			x := h.Holder
			fmt.Fprintf(tw, " held by pid %d (database %s, user %s, %s, open %s, query started %s)", x.PID, x.Database, x.User, x.State,
				time.Duration(x.Age*float64(time.Second)).Round(time.Second), orNone(x.QueryAt))
			if x.Prepared != "" {
				fmt.Fprintf(tw, " by prepared transaction %q", x.Prepared)
			}
		default:
			fmt.Fprint(tw, ", no transaction holds it")
		}
		if h.Delaying {
			fmt.Fprint(tw, "; readers wait for it")
		}
		fmt.Fprintln(tw)
		if h.Holder != nil && h.Holder.Query != "" {
			fmt.Fprintf(tw, "\t  last statement: %s\n", oneLine(h.Holder.Query))
		}
	}
	if len(d.Horizon.Transactions) > 0 {
		fmt.Fprintln(tw, "\nTRANSACTIONS (oldest id first)\nPID\tXID\tDATABASE\tUSER\tSTATE\tAGE\tQUERY")
		for i, x := range d.Horizon.Transactions {
			if i == 10 {
				fmt.Fprintf(tw, "… %d more (-json lists them all)\n", len(d.Horizon.Transactions)-i)
				break
			}
			pid := fmt.Sprint(x.PID)
			if x.Prepared != "" {
				pid = "prepared " + x.Prepared
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", pid, x.XID, x.Database, x.User, x.State,
				time.Duration(x.Age*float64(time.Second)).Round(time.Second), clipText(oneLine(x.Query), 60))
		}
	}
	if d.Head != nil {
		fmt.Fprintln(tw, "\nREADERS\nNAME\tKIND\tSTATE\tLAG EVENTS\tLAG\tERRORS\tLEADER\tHEARTBEAT\tLAST ERROR")
		if len(d.Readers) == 0 {
			fmt.Fprintln(tw, "(no checkpoints)")
		}
		for _, r := range d.Readers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\n", r.Name, r.Kind, r.State, r.LagEvents,
				time.Duration(r.LagSeconds*float64(time.Second)).Round(time.Second), r.ErrorCount, r.Leader, r.HeartbeatAt, clipText(oneLine(r.LastError), 60))
		}
		fmt.Fprintln(tw)
	}
	if x := d.Effects; x != nil {
		fmt.Fprintf(tw, "EFFECTS\tpending %d, executing %d, completed %d, failed %d\n", x.Pending, x.Executing, x.Completed, x.Failed)
	}
	if r := d.Runstore; r != nil {
		fmt.Fprintf(tw, "RUNS\tsnapshot lag %s", time.Duration(r.LagSeconds*float64(time.Second)).Round(time.Millisecond))
		if r.LagHigh {
			fmt.Fprint(tw, " (HIGH)")
		}
		fmt.Fprintf(tw, ", %d STALE\n", r.StaleRuns)
	}
	if len(d.Problems) == 0 {
		fmt.Fprintln(tw, "\nPROBLEMS\tnone")
	} else {
		fmt.Fprintln(tw, "\nPROBLEMS")
		for _, p := range d.Problems {
			fmt.Fprintf(tw, "  - %s\n", p)
		}
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clipText cuts s to at most n runes.
func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
