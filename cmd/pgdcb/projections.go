package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/ident"
	"github.com/pgdcb/pgdcb/projection"
)

type projectionJSON struct {
	Name        string `json:"name"`
	State       string `json:"state"`
	Cursor      string `json:"cursor"`
	Lag         int64  `json:"lag"`
	ErrorCount  int    `json:"error_count"`
	LastError   string `json:"last_error"`
	Leader      string `json:"leader"`
	HeartbeatAt string `json:"heartbeat_at"`
	UpdatedAt   string `json:"updated_at"`
	// A partitioned projection (projection.NewPartitioned): its partitions,
	// how many a worker holds under a live lease, and its workers. Cursor
	// and Lag are its furthest-behind partition's.
	Partitions int `json:"partitions,omitempty"`
	Held       int `json:"held,omitempty"`
	Workers    int `json:"workers,omitempty"`
}

var projectionsCmd = &command{
	name: "projections", args: "[list | pause NAME | resume NAME | reset [-checkpoint-only] NAME | switch NAME]",
	summary: "list projections (state, lag, last error); pause, resume, reset or switch one",
	detail: `The list holds every checkpoint: projections and outbox publishers, and
partitioned projections (state PARTITIONED: their workers and the partitions
held under a live lease; their cursor is the furthest-behind partition's).
Lag is about how many events of any type sort after the checkpoint (the
head's position minus the checkpoint's). reset of a partitioned projection
is projection.Reset from Go, with the function that clears its read model.

reset empties the read model's tables that the projection registered
(projection.Config.Tables) and moves the checkpoint to the start of the log,
ACTIVE, in one transaction: the projection rebuilds its read model from the
log. A projection that registered no tables is refused: its read model
cannot be cleared from here, and the projection would replay every event on
top of what it holds (a balance summed from deposits doubles). For such a
one (or an outbox publisher, which then delivers again), -checkpoint-only
moves the checkpoint alone: the read model is NOT cleared; empty it yourself
first, the projection paused.

switch makes projection NAME, a new version of a read model built beside the
live one (projection.Config.Views), serve the views readers read, once it
has caught up; the previous version is paused (projection.Switch).
`,
	maxArgs: 2,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		checkpointOnly := fs.Bool("checkpoint-only", false, "reset: move only the checkpoint of a projection that registered no tables; the read model is NOT cleared and is rebuilt on top of itself")
		force := fs.Bool("force", false, "no longer resets: see -checkpoint-only")
		return func(e *env) error {
			action := "list"
			if len(e.args) > 0 {
				action = e.args[0]
			}
			switch action {
			case "list":
				if len(e.args) > 1 {
					return usagef("list takes no argument (got %q)", e.args[1:])
				}
			case "pause", "resume", "reset", "switch":
				if len(e.args) != 2 {
					return usagef("%s needs a projection NAME", action)
				}
				if err := projection.ValidateName(e.args[1]); err != nil {
					return &usageError{err: err}
				}
				if *force {
					return usagef("-force no longer resets: reset empties the tables the projection registered, and -checkpoint-only moves the checkpoint of one that registered none")
				}
			default:
				return usagef("unknown action %q (list, pause, resume, reset, switch)", action)
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			if action != "list" {
				name := e.args[1]
				before, err := projection.GetStatus(e.ctx, store, name)
				if err != nil {
					return err
				}
				note := ""
				switch action {
				case "pause":
					err = projection.Pause(e.ctx, store, name)
				case "resume":
					err = projection.Resume(e.ctx, store, name)
				case "switch":
					err = projection.Switch(e.ctx, store, name)
				case "reset":
					switch {
					case len(before.Tables) > 0 && *checkpointOnly:
						return usagef("%s registered its read model's tables (%s): reset empties them with the checkpoint; -checkpoint-only is for a projection that registered none",
							name, strings.Join(before.Tables, ", "))
					case len(before.Tables) == 0 && !*checkpointOnly:
						return fmt.Errorf("%w: %s registered no read model tables (projection.Config.Tables): a reset cannot clear its read model, which the projection would then rebuild on top of itself (sums doubled); "+
							"register its tables, or empty the read model yourself (the projection paused) and pass -checkpoint-only", errPrecondition, name)
					case *checkpointOnly:
						note = " (checkpoint only: the read model was NOT cleared)"
					default:
						note = " (emptied " + strings.Join(before.Tables, ", ") + ")"
					}
					err = projection.Reset(e.ctx, store, name, nil)
				}
				if err != nil {
					return err
				}
				st, err := projection.GetStatus(e.ctx, store, name)
				if err != nil {
					return err
				}
				if e.json {
					out := map[string]any{"name": name, "action": action, "state": string(st.State), "cursor": st.Cursor.String()}
					if action == "reset" {
						out["cleared"] = append([]string{}, st.Tables...)
						out["checkpoint_only"] = *checkpointOnly
					}
					return e.writeJSON(out)
				}
				_, err = fmt.Fprintf(e.stdout, "projection %s: %s%s, now %s at %s\n", name, action, note, st.State, st.Cursor)
				return err
			}
			list, err := projection.List(e.ctx, store)
			if err != nil {
				return err
			}
			head, err := store.Head(e.ctx)
			if err != nil {
				return err
			}
			out := make([]projectionJSON, 0, len(list))
			for _, st := range list {
				lag := head.Position - st.Cursor.Position
				if lag < 0 {
					lag = 0
				}
				out = append(out, projectionJSON{Name: st.Name, State: string(st.State), Cursor: st.Cursor.String(), Lag: lag, ErrorCount: st.ErrorCount,
					LastError: st.LastError, Leader: st.Leader, HeartbeatAt: timeText(st.HeartbeatAt), UpdatedAt: timeText(st.UpdatedAt)})
			}
			parts, err := partitionedList(e.ctx, store, head)
			if err != nil {
				return err
			}
			out = append(out, parts...)
			if e.json {
				return e.writeJSON(map[string]any{"head": head.String(), "projections": out})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tLAG\tERRORS\tLEADER\tHEARTBEAT\tLAST ERROR")
			for _, p := range out {
				if p.Partitions > 0 {
					p.Leader = fmt.Sprintf("%d workers, %d/%d held", p.Workers, p.Held, p.Partitions)
				}
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.State, p.Lag, p.ErrorCount, p.Leader, p.HeartbeatAt, p.LastError)
			}
			return tw.Flush()
		}
	},
}

// partitionedList reads the partitioned projections, one entry each.
func partitionedList(ctx context.Context, store *eventstore.Store, head cursor.Cursor) ([]projectionJSON, error) {
	// projection_partitions: every row (a few per projection).
	schema := ident.Schema(store)
	rows, err := store.Pool().Query(ctx, `SELECT p.name, count(*), count(*) FILTER (WHERE p.owner IS NOT NULL AND p.lease_until > now()),
		       (SELECT count(*) FROM `+schema+`.projection_workers w WHERE w.name = p.name AND w.lease_until > now()),
		       b.transaction_id, b.position, max(p.updated_at)
		  FROM `+schema+`.projection_partitions p
		  CROSS JOIN LATERAL (SELECT transaction_id, position FROM `+schema+`.projection_partitions q
		                       WHERE q.name = p.name ORDER BY transaction_id, position LIMIT 1) b
		 GROUP BY p.name, b.transaction_id, b.position ORDER BY p.name`)
	if err != nil {
		return nil, fmt.Errorf("listing partitioned projections: %w", err)
	}
	defer rows.Close()
	var out []projectionJSON
	for rows.Next() {
		var (
			p       projectionJSON
			cur     cursor.Cursor
			updated time.Time
		)
		if err := rows.Scan(&p.Name, &p.Partitions, &p.Held, &p.Workers, &cur.TransactionID, &cur.Position, &updated); err != nil {
			return nil, err
		}
		p.State, p.Cursor, p.Lag, p.UpdatedAt = "PARTITIONED", cur.String(), max(0, head.Position-cur.Position), timeText(updated)
		out = append(out, p)
	}
	return out, rows.Err()
}
