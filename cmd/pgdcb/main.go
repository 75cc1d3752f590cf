// Command pgdcb administers a pgdcb event store: applies migrations, reports
// their status, and reads or appends events from the shell.
//
//	pgdcb [-dsn URL] [-schema NAME] migrate
//	pgdcb [-dsn URL] [-schema NAME] status
//	pgdcb [-dsn URL] [-schema NAME] rebase-xids
//	pgdcb [-dsn URL] [-schema NAME] head
//	pgdcb [-dsn URL] [-schema NAME] read [-type T]... [-tag k=v]... [-after CURSOR] [-limit N] [-backwards]
//	pgdcb [-dsn URL] [-schema NAME] append -type T [-tag k=v]... [-data JSON]
//
// The DSN defaults to $PGDCB_DATABASE_URL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
	"github.com/pgdcb/pgdcb/tags"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "pgdcb:", err)
		stop()
		os.Exit(1)
	}
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

var errUsage = errors.New("usage: pgdcb [-dsn URL] [-schema NAME] migrate|status|rebase-xids|head|read|append [flags]")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	global := flag.NewFlagSet("pgdcb", flag.ContinueOnError)
	global.SetOutput(stderr)
	dsn := global.String("dsn", os.Getenv("PGDCB_DATABASE_URL"), "PostgreSQL URL (default $PGDCB_DATABASE_URL)")
	schema := global.String("schema", pgdcbsql.DefaultSchema, "schema of the store")
	if err := global.Parse(args); err != nil {
		return err
	}
	if global.NArg() == 0 {
		return errUsage
	}
	if *dsn == "" {
		return errors.New("no database: pass -dsn or set PGDCB_DATABASE_URL")
	}
	if err := pgdcbsql.ValidateSchema(*schema); err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	cmd, rest := global.Arg(0), global.Args()[1:]
	switch cmd {
	case "migrate":
		done, err := pgdcbsql.Migrate(ctx, pool, *schema)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema %s: applied %d step(s) %v\n", *schema, len(done), done)
		return nil
	case "status":
		st, err := pgdcbsql.Status(ctx, pool, *schema)
		if err != nil {
			return err
		}
		for _, s := range st {
			state := "pending"
			if s.Applied {
				state = "applied " + s.AppliedAt.Format("2006-01-02 15:04:05Z07:00")
			}
			fmt.Fprintf(stdout, "%03d %-24s %s\n", s.Version, s.Name, state)
		}
		if err := pgdcbsql.CheckCurrent(ctx, pool, *schema); err != nil {
			return nil
		}
		if err := pgdcbsql.CheckTransactionIDs(ctx, pool, *schema); err != nil {
			fmt.Fprintf(stdout, "transaction ids: %v\n", err)
			return nil
		}
		fmt.Fprintln(stdout, "transaction ids: below the server's counter")
		return nil
	case "rebase-xids":
		if err := pgdcbsql.CheckCurrent(ctx, pool, *schema); err != nil {
			return err
		}
		res, err := pgdcbsql.RebaseTransactionIDs(ctx, pool, *schema)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "schema %s: %d transaction ids rebased (%d burned first)\n", *schema, res.IDs, res.Burned)
		return nil
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: *schema})
	if err != nil {
		return err
	}
	if err := store.CheckSchema(ctx); err != nil {
		return err
	}
	switch cmd {
	case "head":
		c, err := store.Head(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s\ttransaction_id=%d position=%d\n", c, c.TransactionID, c.Position)
		return nil
	case "read":
		return readCmd(ctx, store, rest, stdout, stderr)
	case "append":
		return appendCmd(ctx, store, rest, stdout, stderr)
	}
	return fmt.Errorf("unknown command %q: %w", cmd, errUsage)
}

type jsonEvent struct {
	Position      int64           `json:"position"`
	TransactionID uint64          `json:"transaction_id"`
	Type          string          `json:"type"`
	Tags          []string        `json:"tags"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	OccurredAt    string          `json:"occurred_at"`
}

func readCmd(ctx context.Context, store *eventstore.Store, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("read", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var types, tagArgs multi
	fs.Var(&types, "type", "event type (repeat: any of)")
	fs.Var(&tagArgs, "tag", "tag key=value (repeat: all of)")
	after := fs.String("after", "", "cursor to read after")
	limit := fs.Int("limit", 0, "most events (0: all)")
	backwards := fs.Bool("backwards", false, "newest first")
	if err := fs.Parse(args); err != nil {
		return err
	}
	q := query.All()
	if len(types) > 0 || len(tagArgs) > 0 {
		ts, err := tags.ParseSet(tagArgs...)
		if err != nil {
			return err
		}
		q = query.New(query.Item{Types: types, Tags: ts})
	}
	opts := &eventstore.ReadOptions{Limit: *limit, Backwards: *backwards}
	if *after != "" {
		c, err := cursor.Parse(*after)
		if err != nil {
			return err
		}
		opts.After = &c
	}
	es := store.Read(ctx, q, opts)
	enc := json.NewEncoder(stdout)
	for ev, err := range es.All() {
		if err != nil {
			return err
		}
		if err := enc.Encode(jsonEvent{ev.Position, ev.TransactionID, ev.Type, ev.Tags.Strings(), ev.Data, ev.Metadata, ev.OccurredAt.Format("2006-01-02T15:04:05.000000Z07:00")}); err != nil {
			return err
		}
	}
	c, _ := es.Cursor()
	fmt.Fprintf(stderr, "cursor %s\n", c)
	return nil
}

func appendCmd(ctx context.Context, store *eventstore.Store, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("append", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tagArgs multi
	typ := fs.String("type", "", "event type")
	fs.Var(&tagArgs, "tag", "tag key=value (repeat)")
	data := fs.String("data", "{}", "JSON payload")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ts, err := tags.ParseSet(tagArgs...)
	if err != nil {
		return err
	}
	res, err := store.Append(ctx, []eventstore.Event{{Type: *typ, Tags: ts, Data: json.RawMessage(*data)}})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "appended at position %d (transaction %d)\n", res.Positions[0], res.TransactionID)
	return nil
}
