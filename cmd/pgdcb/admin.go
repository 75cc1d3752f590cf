package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/version"
	"github.com/pgdcb/pgdcb/runstore"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

const modulePath = "github.com/pgdcb/pgdcb"

func (e *env) writeJSON(v any) error {
	return json.NewEncoder(e.stdout).Encode(v)
}

// note writes a message for the operator on stderr: under -json the object
// v (one line), else the text.
func (e *env) note(v map[string]any, format string, args ...any) {
	if e.json {
		_ = json.NewEncoder(e.stderr).Encode(v)
		return
	}
	fmt.Fprintf(e.stderr, format+"\n", args...)
}

// logger returns the logger of the command's readers: warnings (a retry
// and why) on stderr, as JSON under -json.
func (e *env) logger() *slog.Logger {
	opts := &slog.HandlerOptions{Level: slog.LevelWarn}
	if e.json {
		return slog.New(slog.NewJSONHandler(e.stderr, opts))
	}
	return slog.New(slog.NewTextHandler(e.stderr, opts))
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

var versionCmd = &command{
	name: "version", summary: "print the release, the commit it was built from and the schema version it ships",
	noDB: true,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			b := version.Read()
			if e.json {
				return e.writeJSON(map[string]any{"module": modulePath, "version": version.Release,
					"commit": b.Commit, "modified": b.Modified, "go": b.Go, "schema_version": pgdcbsql.LatestVersion()})
			}
			_, err := fmt.Fprintf(e.stdout, "pgdcb %s, schema version %d\n", b, pgdcbsql.LatestVersion())
			return err
		}
	},
}

var sqlCmd = &command{
	name: "sql", args: "[-after N]",
	summary: "print the migrations' SQL for the schema, for teams that run their own migration tool",
	detail: `Prints what migrate applies: the schema and its schema_migrations and
schema_functions tables, then every step after N (default 0: all) in its own
transaction with its version row and checksum, then the server functions in
one transaction with their checksums. With -runstore, runstore's steps after
N instead (after the core's). Needs no database.
`,
	noDB: true,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		after := fs.Int("after", 0, "print only the steps after this version")
		rs := fs.Bool("runstore", false, "print runstore's migrations (runstore.Script) instead of the core's")
		return func(e *env) error {
			if *after < 0 {
				return &pgdcb.InvalidArgumentError{Name: "-after", Reason: fmt.Sprintf("must not be negative (got %d)", *after)}
			}
			script, err := pgdcbsql.Script(e.schema, *after)
			if *rs {
				script, err = runstore.Script(e.schema, *after)
			}
			if err != nil {
				return err
			}
			if e.json {
				return e.writeJSON(map[string]any{"schema": e.schema, "after": *after, "schema_version": pgdcbsql.LatestVersion(), "sql": script})
			}
			_, err = io.WriteString(e.stdout, script)
			return err
		}
	},
}

var migrateCmd = &command{
	name: "migrate", summary: "apply the pending migrations (as the schema's owner)",
	detail: "Applies the core's pending steps and the server functions whose text changed\n" +
		"(sql.Migrate); with -runstore, runstore's steps after them (runstore.Migrate).\n",
	flags: func(fs *flag.FlagSet) func(e *env) error {
		rs := fs.Bool("runstore", false, "also apply runstore's migrations (its run_snapshots table and indexes)")
		return func(e *env) error {
			done, err := pgdcbsql.Migrate(e.ctx, e.pool, e.schema)
			if err != nil {
				return err
			}
			if done == nil {
				done = []int{}
			}
			rsDone := []int{}
			if *rs {
				if rsDone, err = runstore.Migrate(e.ctx, e.pool, e.schema); err != nil {
					return err
				}
				if rsDone == nil {
					rsDone = []int{}
				}
			}
			if e.json {
				out := map[string]any{"schema": e.schema, "applied": done, "schema_version": pgdcbsql.LatestVersion()}
				if *rs {
					out["runstore_applied"] = rsDone
				}
				return e.writeJSON(out)
			}
			_, err = fmt.Fprintf(e.stdout, "schema %s: applied %d step(s) %v; at version %d\n", e.schema, len(done), done, pgdcbsql.LatestVersion())
			if err == nil && *rs {
				_, err = fmt.Fprintf(e.stdout, "schema %s: applied %d runstore step(s) %v\n", e.schema, len(rsDone), rsDone)
			}
			return err
		}
	},
}

type statusJSON struct {
	Schema          string            `json:"schema"`
	SchemaVersion   int               `json:"schema_version"`
	Migrations      []migrationJSON   `json:"migrations"`
	Pending         []int             `json:"pending"`
	Current         bool              `json:"current"`
	SchemaError     string            `json:"schema_error,omitempty"`
	TransactionIDs  *transactionsJSON `json:"transaction_ids,omitempty"`
	NeedsAttention  bool              `json:"needs_attention"`
	AttentionReason string            `json:"reason,omitempty"`
}

type migrationJSON struct {
	Version   int    `json:"version"`
	Name      string `json:"name"`
	Applied   bool   `json:"applied"`
	AppliedAt string `json:"applied_at,omitempty"`
}

type transactionsJSON struct {
	OK     bool   `json:"ok"`
	Stored uint64 `json:"stored,omitempty"`
	Next   uint64 `json:"next,omitempty"`
	Error  string `json:"error,omitempty"`
}

var statusCmd = &command{
	name: "status", summary: "show the migrations and check the schema; exit 3 if it needs attention",
	detail: "Exits 3 when migrations are pending, the schema check fails, or the log's\n" +
		"transaction ids are ahead of the server (run rebase-xids).\n",
	flags: func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			st, err := pgdcbsql.Status(e.ctx, e.pool, e.schema)
			if err != nil {
				return err
			}
			out := statusJSON{Schema: e.schema, SchemaVersion: pgdcbsql.LatestVersion(), Migrations: []migrationJSON{}, Pending: []int{}}
			for _, s := range st {
				m := migrationJSON{Version: s.Version, Name: s.Name, Applied: s.Applied}
				if s.Applied {
					m.AppliedAt = timeText(s.AppliedAt)
				} else {
					out.Pending = append(out.Pending, s.Version)
				}
				out.Migrations = append(out.Migrations, m)
			}
			var reasons []string
			if len(out.Pending) > 0 {
				reasons = append(reasons, fmt.Sprintf("%d migration(s) pending %v: run 'pgdcb migrate'", len(out.Pending), out.Pending))
			}
			if err := pgdcbsql.CheckCurrent(e.ctx, e.pool, e.schema); err != nil {
				out.SchemaError = message(err)
				if len(out.Pending) == 0 {
					reasons = append(reasons, "schema check: "+out.SchemaError)
				}
			} else {
				out.Current = true
				tx := &transactionsJSON{OK: true}
				if err := pgdcbsql.CheckTransactionIDs(e.ctx, e.pool, e.schema); err != nil {
					var ahead *pgdcbsql.TransactionIDsAheadError
					if !errors.As(err, &ahead) {
						return errfmt.Wrap("check transaction ids", err)
					}
					tx = &transactionsJSON{Stored: ahead.Stored, Next: ahead.Next, Error: message(err)}
					reasons = append(reasons, "transaction ids: "+tx.Error)
				}
				out.TransactionIDs = tx
			}
			out.NeedsAttention = len(reasons) > 0
			out.AttentionReason = strings.Join(reasons, "; ")
			if e.json {
				if err := e.writeJSON(out); err != nil {
					return err
				}
			} else {
				for _, m := range out.Migrations {
					state := "pending"
					if m.Applied {
						state = "applied " + m.AppliedAt
					}
					fmt.Fprintf(e.stdout, "%03d %-24s %s\n", m.Version, m.Name, state)
				}
				switch {
				case out.SchemaError != "":
					fmt.Fprintf(e.stdout, "schema: %s\n", out.SchemaError)
				default:
					fmt.Fprintf(e.stdout, "schema: current (version %d)\n", out.SchemaVersion)
				}
				if tx := out.TransactionIDs; tx != nil {
					if tx.OK {
						fmt.Fprintln(e.stdout, "transaction ids: below the server's counter")
					} else {
						fmt.Fprintf(e.stdout, "transaction ids: %s\n", tx.Error)
					}
				}
			}
			if out.NeedsAttention {
				return fmt.Errorf("%w: %s", errSchemaAttention, out.AttentionReason)
			}
			return nil
		}
	},
}

var grantCmd = &command{
	name: "grant", args: "-role NAME", summary: "give an application role what the library needs (as the owner)",
	flags: func(fs *flag.FlagSet) func(e *env) error {
		role := fs.String("role", "", "the application role to grant (it must exist)")
		return func(e *env) error {
			if *role == "" {
				return &pgdcb.InvalidArgumentError{Name: "-role", Reason: "is required: the application role to grant (pgdcb grant -role NAME)"}
			}
			if err := pgdcbsql.Grant(e.ctx, e.pool, e.schema, *role); err != nil {
				return err
			}
			if e.json {
				return e.writeJSON(map[string]any{"schema": e.schema, "role": *role, "granted": true})
			}
			_, err := fmt.Fprintf(e.stdout, "schema %s: role %s may read, append, run commands, projections and the runstore; it may not update, delete, truncate events or run retention\n", e.schema, *role)
			return err
		}
	},
}

// rebaseRate is about how many transaction ids RebaseTransactionIDs burns a
// second (see its documentation).
const rebaseRate = 50000

var rebaseCmd = &command{
	name: "rebase-xids", args: "[-force]", summary: "mend a restored log whose transaction ids are ahead of the server",
	detail: `Rewrites every stored transaction id (events, commands, checkpoints) to
3, 4, 5, ... in log order, in one transaction holding EXCLUSIVE locks: stop
every process that appends or follows the log first. It invalidates every
cursor held outside the database: ETags given to clients, checkpoints kept
elsewhere, cursors in memory. It refuses unless the log is ahead of the
server (what 'pgdcb status' reports after restoring a dump into another
cluster); -force rebases a healthy log anyway.
`,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		force := fs.Bool("force", false, "rebase even if the log is not ahead of the server")
		return func(e *env) error {
			if err := pgdcbsql.CheckCurrent(e.ctx, e.pool, e.schema); err != nil {
				return errfmt.Wrap("check schema", err)
			}
			err := pgdcbsql.CheckTransactionIDs(e.ctx, e.pool, e.schema)
			switch {
			case errors.Is(err, pgdcb.ErrTransactionIDsAhead):
			case err != nil:
				return errfmt.Wrap("check transaction ids", err)
			case !*force:
				return errors.New("refused: the log's transaction ids are below the server's counter, nothing to mend; " +
					"rebasing would rewrite them all and invalidate every cursor, ETag and checkpoint held outside the database (pass -force to do it anyway)")
			}
			var ids int64
			if err := e.pool.QueryRow(e.ctx, `SELECT count(DISTINCT transaction_id) FROM `+pgx.Identifier{e.schema}.Sanitize()+`.events`).Scan(&ids); err != nil {
				return errfmt.Wrap("count transaction ids", err)
			}
			upTo := (time.Duration(ids/rebaseRate+1) * time.Second).String()
			e.note(map[string]any{"rebasing_transaction_ids": ids, "schema": e.schema, "up_to": upTo,
				"warning": "cursors, ETags and checkpoints held outside the database become invalid"},
				"pgdcb: rebase-xids: rewriting %d transaction id(s) of schema %s (events, commands, checkpoints) in one transaction with EXCLUSIVE locks; "+
					"cursors, ETags and checkpoints held outside the database become invalid. "+
					"It may first burn up to %d transaction ids (about %d a second, so up to %s), with no progress report until done.",
				ids, e.schema, ids, rebaseRate, upTo)
			start := time.Now()
			ids, burned, err := pgdcbsql.RebaseTransactionIDs(e.ctx, e.pool, e.schema)
			if err != nil {
				return err
			}
			if e.json {
				return e.writeJSON(map[string]any{"schema": e.schema, "ids": ids, "burned": burned, "seconds": time.Since(start).Seconds()})
			}
			_, err = fmt.Fprintf(e.stdout, "schema %s: %d transaction ids rebased (%d burned first) in %s\n", e.schema, ids, burned, time.Since(start).Round(time.Millisecond))
			return err
		}
	},
}

type cursorJSON struct {
	Cursor        string `json:"cursor"`
	TransactionID uint64 `json:"transaction_id"`
	Position      int64  `json:"position"`
}

func newCursorJSON(c cursor.Cursor) cursorJSON {
	return cursorJSON{c.String(), c.TransactionID, c.Position}
}

var headCmd = &command{
	name: "head", summary: "print the cursor of the newest event",
	flags: func(fs *flag.FlagSet) func(e *env) error {
		return func(e *env) error {
			store, err := e.store()
			if err != nil {
				return err
			}
			c, err := store.Head(e.ctx)
			if err != nil {
				return err
			}
			if e.json {
				return e.writeJSON(newCursorJSON(c))
			}
			_, err = fmt.Fprintf(e.stdout, "%s\ttransaction_id=%d position=%d\n", c, c.TransactionID, c.Position)
			return err
		}
	},
}
