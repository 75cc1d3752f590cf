package main

import (
	"flag"
	"fmt"
	"text/tabwriter"

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
}

var projectionsCmd = &command{
	name: "projections", args: "[list | pause NAME | resume NAME | reset -checkpoint-only NAME]",
	summary: "list projections (state, lag, last error); pause, resume or reset one's checkpoint",
	detail: `The list holds every checkpoint: projections and outbox publishers. Lag is
about how many events of any type sort after the checkpoint (the head's
position minus the checkpoint's).

reset moves the checkpoint to the start of the log, ACTIVE, and nothing else:
it does NOT clear the read model, so a running projection replays every event
on top of what it already holds (a balance summed from deposits doubles).
It is refused unless -checkpoint-only says that is meant. To rebuild a read
model: pause the projection, empty its tables yourself, then reset
-checkpoint-only; or reset from the application (projection.Reset with a
function that empties the read model in the same transaction).
`,
	maxArgs: 2,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		checkpointOnly := fs.Bool("checkpoint-only", false, "reset: move only the checkpoint; the read model is NOT cleared and is rebuilt on top of itself")
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
			case "pause", "resume", "reset":
				if len(e.args) != 2 {
					return usagef("%s needs a projection NAME", action)
				}
				if err := projection.ValidateName(e.args[1]); err != nil {
					return &usageError{err: err}
				}
				if action == "reset" && !*checkpointOnly {
					why := "reset moves only the checkpoint: it cannot clear the read model of %s, which the projection would then rebuild on top of itself (sums doubled); " +
						"empty the read model first (the projection paused), then pass -checkpoint-only"
					if *force {
						why += " (-force no longer resets)"
					}
					return usagef(why, e.args[1])
				}
			default:
				return usagef("unknown action %q (list, pause, resume, reset)", action)
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			if action != "list" {
				name := e.args[1]
				if _, err := projection.GetStatus(e.ctx, store, name); err != nil {
					return err
				}
				switch action {
				case "pause":
					err = projection.Pause(e.ctx, store, name)
				case "resume":
					err = projection.Resume(e.ctx, store, name)
				case "reset":
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
					return e.writeJSON(map[string]any{"name": name, "action": action, "state": string(st.State), "cursor": st.Cursor.String()})
				}
				_, err = fmt.Fprintf(e.stdout, "projection %s: %s, now %s at %s\n", name, action, st.State, st.Cursor)
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
				out = append(out, projectionJSON{st.Name, string(st.State), st.Cursor.String(), lag, st.ErrorCount, st.LastError, st.Leader, timeText(st.HeartbeatAt), timeText(st.UpdatedAt)})
			}
			if e.json {
				return e.writeJSON(map[string]any{"head": head.String(), "projections": out})
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tSTATE\tLAG\tERRORS\tLEADER\tHEARTBEAT\tLAST ERROR")
			for _, p := range out {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", p.Name, p.State, p.Lag, p.ErrorCount, p.Leader, p.HeartbeatAt, p.LastError)
			}
			return tw.Flush()
		}
	},
}
