package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/subscription"
	"github.com/pgdcb/pgdcb/tags"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

// parseQuery reads the command line's query syntax (see querySyntaxText)
// given to the flag named name. An empty item (no type and no tag: "A;",
// ";", ":", "") would match every event, so it is refused: '*' says that.
func parseQuery(name, s string) (query.Query, error) {
	q, err := parseQueryText(s)
	if err != nil {
		return query.Query{}, fmt.Errorf("%s: %w", name, err)
	}
	return q, nil
}

func parseQueryText(s string) (query.Query, error) {
	s = strings.TrimSpace(s)
	if s == "*" {
		return query.All(), nil
	}
	var items []query.Item
	if strings.HasPrefix(s, "[") {
		var q query.Query // the JSON form (query.Query.MarshalJSON)
		if err := q.UnmarshalJSON([]byte(s)); err != nil {
			return query.Query{}, err
		}
		items = q.Items()
	} else {
		for _, part := range strings.Split(s, ";") {
			typesPart, tagsPart, _ := strings.Cut(strings.TrimSpace(part), ":")
			ts, err := tags.ParseSet(splitList(tagsPart)...)
			if err != nil {
				return query.Query{}, err
			}
			items = append(items, query.Item{Types: splitList(typesPart), Tags: ts})
		}
	}
	for i, it := range items {
		if len(it.Types) == 0 && it.Tags.Len() == 0 {
			return query.Query{}, fmt.Errorf("%w: item %d of %d in %q is empty (it would match every event): "+
				"give each item a type or a tag, or '*' for every event", pgdcb.ErrInvalidQuery, i+1, len(items), s)
		}
	}
	q := query.New(items...)
	if q.IsEmpty() {
		return query.Query{}, fmt.Errorf("%w: %q has no item", pgdcb.ErrInvalidQuery, s)
	}
	if err := q.Validate(); err != nil {
		return query.Query{}, err
	}
	return q, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func parseCursorFlag(name, s string) (cursor.Cursor, error) {
	if s == "" {
		return cursor.Start, nil
	}
	c, err := cursor.Parse(s)
	if err != nil {
		return cursor.Cursor{}, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// jsonEvent is one line of read, export and tail, and what append -stdin and
// import read (append -stdin ignores position, transaction_id and
// occurred_at; import keeps occurred_at and groups lines by transaction_id).
type jsonEvent struct {
	Position      int64           `json:"position,omitempty"`
	TransactionID uint64          `json:"transaction_id,omitempty"`
	Type          string          `json:"type"`
	Tags          []string        `json:"tags"`
	Data          json.RawMessage `json:"data"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
	ID            string          `json:"id,omitempty"`
	OccurredAt    string          `json:"occurred_at,omitempty"`
}

func toJSON(ev pgdcb.StoredEvent) jsonEvent {
	j := jsonEvent{ev.Position, ev.TransactionID, ev.Type, ev.Tags.Strings(), ev.Data, ev.Metadata, "", ev.OccurredAt.Format("2006-01-02T15:04:05.000000Z07:00")}
	if j.Tags == nil {
		j.Tags = []string{}
	}
	if ev.ID != uuid.Nil {
		j.ID = ev.ID.String()
	}
	return j
}

func (j jsonEvent) event() (pgdcb.Event, error) {
	ts, err := tags.ParseSet(j.Tags...)
	if err != nil {
		return pgdcb.Event{}, err
	}
	ev := pgdcb.Event{Type: j.Type, Tags: ts, Data: j.Data, Metadata: j.Metadata}
	if len(ev.Data) == 0 || string(ev.Data) == "null" {
		ev.Data = json.RawMessage("{}")
	}
	if string(ev.Metadata) == "null" {
		ev.Metadata = nil
	}
	if j.ID != "" {
		id, err := uuid.Parse(j.ID)
		if err != nil {
			return pgdcb.Event{}, fmt.Errorf("%w: id %q: %v", pgdcb.ErrInvalidEvent, j.ID, err)
		}
		ev.ID = id
	}
	return ev, nil
}

// readNDJSON calls fn with each non-blank line's event, in order.
func readNDJSON(r io.Reader, fn func(line int, j jsonEvent, ev pgdcb.Event) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read stdin: %w", err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			var j jsonEvent
			if uerr := json.Unmarshal(t, &j); uerr != nil {
				return fmt.Errorf("%w: stdin line %d: %v", pgdcb.ErrInvalidEvent, line, uerr)
			}
			ev, verr := j.event()
			if verr != nil {
				return fmt.Errorf("stdin line %d: %w", line, verr)
			}
			if ferr := fn(line, j, ev); ferr != nil {
				return ferr
			}
		}
		if err != nil {
			return nil
		}
	}
}

var readCmd = &command{
	name: "read", args: "[-type T]... [-tag k=v]... [-query Q] [-after CURSOR] [-limit N] [-backwards]",
	summary: "read events as NDJSON; the cursor goes to stderr",
	detail:  querySyntaxText,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		var types, tagArgs multi
		fs.Var(&types, "type", "event type (repeat: any of)")
		fs.Var(&tagArgs, "tag", "tag key=value (repeat: all of)")
		qs := fs.String("query", "", "query (instead of -type/-tag)")
		after := fs.String("after", "", "cursor to read after")
		limit := fs.Int("limit", 0, "most events (0: all)")
		backwards := fs.Bool("backwards", false, "newest first")
		return func(e *env) error {
			if *limit < 0 {
				return &pgdcb.InvalidArgumentError{Name: "-limit", Reason: fmt.Sprintf("must not be negative (got %d; 0 means all)", *limit)}
			}
			q := query.All()
			switch {
			case *qs != "" && (len(types) > 0 || len(tagArgs) > 0):
				return usagef("-query excludes -type and -tag")
			case *qs != "":
				var err error
				if q, err = parseQuery("-query", *qs); err != nil {
					return err
				}
			case len(types) > 0 || len(tagArgs) > 0:
				ts, err := tags.ParseSet(tagArgs...)
				if err != nil {
					return err
				}
				q = query.New(query.Item{Types: types, Tags: ts})
			}
			opts := &pgdcb.ReadOptions{Limit: *limit, Backwards: *backwards}
			if *after != "" {
				c, err := parseCursorFlag("-after", *after)
				if err != nil {
					return err
				}
				opts.After = &c
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			es := store.Read(e.ctx, q, opts)
			enc := json.NewEncoder(e.stdout)
			for ev, err := range es.All() {
				if err != nil {
					return err
				}
				if err := enc.Encode(toJSON(ev)); err != nil {
					return err
				}
			}
			c, _ := es.Cursor()
			e.note(map[string]any{"cursor": c.String()}, "cursor %s", c)
			return nil
		}
	},
}

var appendCmd = &command{
	name: "append", args: "(-type T [-tag k=v]... [-data JSON] [-metadata JSON] [-id UUID] | -stdin) [-if-none Q [-after CURSOR]] [-idempotency Q]",
	summary: "append one event from flags, or NDJSON events from stdin, optionally conditional",
	detail: `With -stdin, each line is one event {"type","tags","data","metadata","id"}
(read's and export's lines are accepted as they are); all of them are appended
in one transaction, so at most the store's batch limits (1000 events, 16 MiB;
use import for more). -if-none Q fails the append (exit 4) if an event matching Q
exists that -after CURSOR has not seen (without -after: any). -idempotency Q
makes it a no-op (exit 5) if an event matching Q exists anywhere.

` + querySyntaxText,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		var tagArgs multi
		typ := fs.String("type", "", "event type")
		fs.Var(&tagArgs, "tag", "tag key=value (repeat)")
		data := fs.String("data", "{}", "JSON payload")
		meta := fs.String("metadata", "", "JSON metadata")
		id := fs.String("id", "", "event id (a UUID; appending a stored id exits 5)")
		stdin := fs.Bool("stdin", false, "read NDJSON events from stdin")
		ifNone := fs.String("if-none", "", "condition: fail if an event matching this query exists after -after")
		after := fs.String("after", "", "cursor of the decision (with -if-none)")
		idem := fs.String("idempotency", "", "idempotency query: no-op if a matching event exists")
		return func(e *env) error {
			var events []pgdcb.Event
			switch {
			case *stdin && (*typ != "" || len(tagArgs) > 0 || *meta != "" || *id != ""):
				return usagef("-stdin excludes -type, -tag, -data, -metadata and -id")
			case *stdin:
				if err := readNDJSON(e.stdin, func(_ int, _ jsonEvent, ev pgdcb.Event) error {
					events = append(events, ev)
					return nil
				}); err != nil {
					return err
				}
				if len(events) == 0 {
					return usagef("no events on stdin")
				}
			case *typ == "":
				return usagef("-type or -stdin is required")
			default:
				j := jsonEvent{Type: *typ, Tags: tagArgs, Data: json.RawMessage(*data), ID: *id}
				if *meta != "" {
					j.Metadata = json.RawMessage(*meta)
				}
				ev, err := j.event()
				if err != nil {
					return err
				}
				events = append(events, ev)
			}
			if *after != "" && *ifNone == "" {
				return usagef("-after needs -if-none")
			}
			var cond *appendif.Condition
			if *ifNone != "" {
				q, err := parseQuery("-if-none", *ifNone)
				if err != nil {
					return err
				}
				var ap *cursor.Cursor
				if *after != "" {
					c, err := parseCursorFlag("-after", *after)
					if err != nil {
						return err
					}
					ap = &c
				}
				c := appendif.FailIf(q, ap)
				cond = &c
			}
			if *idem != "" {
				q, err := parseQuery("-idempotency", *idem)
				if err != nil {
					return err
				}
				if cond == nil {
					cond = &appendif.Condition{}
				}
				c := cond.WithIdempotency(q)
				cond = &c
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			var res pgdcb.AppendResult
			if cond != nil {
				res, err = store.AppendIf(e.ctx, events, *cond)
			} else {
				res, err = store.Append(e.ctx, events)
			}
			if err != nil {
				return err
			}
			c := cursor.Cursor{TransactionID: res.TransactionID, Position: res.Positions[len(res.Positions)-1]}
			if e.json {
				return e.writeJSON(map[string]any{"transaction_id": res.TransactionID, "positions": res.Positions, "cursor": c.String()})
			}
			if len(res.Positions) == 1 {
				_, err = fmt.Fprintf(e.stdout, "appended at position %d (transaction %d), cursor %s\n", res.Positions[0], res.TransactionID, c)
			} else {
				_, err = fmt.Fprintf(e.stdout, "appended %d events at positions %d..%d (transaction %d), cursor %s\n", len(res.Positions), res.Positions[0], c.Position, res.TransactionID, c)
			}
			return err
		}
	},
}

func queryFlag(fs *flag.FlagSet) *string {
	return fs.String("query", "*", "events to select (query syntax; '*': all)")
}

var exportCmd = &command{
	name: "export", args: "[-query Q] [-after CURSOR] [-batch N] [-progress N]",
	summary: "stream events as NDJSON from a cursor; progress and the final cursor on stderr",
	detail: `Exports every matching event committed before it started, in pages that
never skip a transaction still running (as tail does), so 'export -after
CURSOR' with the cursor of the last export continues it. While an older
transaction of the store's database is still open, events behind it cannot be
read yet: export waits for it (and says so on stderr after a second).
The lines are import's and append -stdin's input. Events are exported as
stored, never upcast (a backup), each with the version it was written with
in its metadata (pgdcb_version) when its type had upcasters.

` + querySyntaxText,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		qs := queryFlag(fs)
		after := fs.String("after", "", "cursor to export after (default: the start)")
		batch := fs.Int("batch", 1000, "events per page")
		progress := fs.Int("progress", 10000, "report progress on stderr every N events (0: never)")
		return func(e *env) error {
			q, err := parseQuery("-query", *qs)
			if err != nil {
				return err
			}
			from, err := parseCursorFlag("-after", *after)
			if err != nil {
				return err
			}
			if *batch <= 0 || *progress < 0 {
				return &pgdcb.InvalidArgumentError{Name: "-batch/-progress", Reason: "-batch must be positive, -progress not negative"}
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			bw := bufio.NewWriter(e.stdout)
			enc := json.NewEncoder(bw)
			// Everything committed before now is exported: up to the head.
			head, err := store.Head(e.ctx)
			if err != nil {
				return fmt.Errorf("read the head: %w", err)
			}
			var n int64
			start := time.Now()
			waited, told := time.Duration(0), false
			var heldSince time.Time // when the reads first stopped short of the head
			for {
				b, err := store.ReadTail(e.ctx, q, from, *batch)
				if err != nil {
					return fmt.Errorf("after %d events (cursor %s): %w", n, from, err)
				}
				behind := cursor.Compare(b.Cursor.TransactionID, b.Cursor.Position, head.TransactionID, head.Position) < 0
				for _, ev := range b.Events {
					if err := enc.Encode(toJSON(ev)); err != nil {
						return err
					}
					n++
					if *progress > 0 && n%int64(*progress) == 0 {
						el := time.Since(start).Round(time.Millisecond)
						e.note(map[string]any{"progress": "export", "events": n, "elapsed": el.String()}, "pgdcb: export: %d events (%s)", n, el)
					}
				}
				from = b.Cursor
				if err := bw.Flush(); err != nil {
					return err
				}
				if len(b.Events) == *batch {
					continue
				}
				if !behind {
					break
				}
				// Short of the head: an open transaction holds the horizon.
				// Said after a second of wall time (the reads between the
				// sleeps take time too, more on a loaded server).
				if heldSince.IsZero() {
					heldSince = time.Now()
				}
				if time.Since(heldSince) >= time.Second && !told {
					e.note(map[string]any{"waiting_for_transaction": b.Horizon},
						"pgdcb: export: waiting for transaction %d, still open, to end (events after it cannot be read yet)", b.Horizon)
					told = true
				}
				d := min(10*time.Millisecond+waited/10, 200*time.Millisecond)
				select {
				case <-e.ctx.Done():
					return fmt.Errorf("after %d events (cursor %s): %w", n, from, e.ctx.Err())
				case <-time.After(d):
				}
				waited += d
			}
			e.note(map[string]any{"exported": n, "cursor": from.String()}, "pgdcb: export: %d events; cursor %s", n, from)
			return nil
		}
	},
}

var tailCmd = &command{
	name: "tail", args: "[-query Q] [-after CURSOR] [-poll D] [-logical]",
	summary: "follow events as NDJSON until interrupted; reconnects by itself",
	detail: `Prints the matching events after the cursor, then waits for new ones
(LISTEN/NOTIFY and polling), never skipping a late commit. On Ctrl-C or
SIGTERM it stops, prints the cursor to resume from on stderr and exits 0.
A lost connection is retried with backoff, each retry warned about on stderr.

With -logical it reads through logical decoding (server: wal_level=logical,
a role with REPLICATION; without them it exits 6 at once): events come in
the order their transactions committed, and a transaction left open in the
same database no longer holds them back. It uses the replication slot of reader "pgdcb-tail" of the schema
(one -logical tail per schema at a time), creates it at start (replacing one
a killed tail left) and drops it on exit. The printed cursor never passes an
open transaction: resuming with -after it may print again events that
committed out of log order after it, never skip one.

` + querySyntaxText,
	flags: func(fs *flag.FlagSet) func(e *env) error {
		qs := queryFlag(fs)
		after := fs.String("after", "", "cursor to follow from (default: the start)")
		poll := fs.Duration("poll", time.Second, "poll interval when no notification comes")
		logicalMode := fs.Bool("logical", false, "read through logical decoding, in commit order (needs wal_level=logical)")
		return func(e *env) error {
			q, err := parseQuery("-query", *qs)
			if err != nil {
				return err
			}
			from, err := parseCursorFlag("-after", *after)
			if err != nil {
				return err
			}
			if *poll <= 0 {
				return &pgdcb.InvalidArgumentError{Name: "-poll", Reason: "must be positive"}
			}
			store, err := e.store()
			if err != nil {
				return err
			}
			// Retries (a lost connection, a failed read) are warned about
			// on stderr, as they happen.
			cfg := &subscription.Config{Name: tailReader, PollInterval: *poll, Logger: e.logger()}
			if *logicalMode {
				if err := checkLogical(e.ctx, store); err != nil {
					return err
				}
				cfg.Logical = &logical.Config{}
			}
			sub, err := subscription.New(store, q, cfg)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(e.stdout)
			cur := from
			h := func(_ context.Context, b subscription.Batch) error {
				for _, ev := range b.Events {
					if err := enc.Encode(toJSON(ev)); err != nil {
						return err
					}
				}
				cur = b.Cursor
				return nil
			}
			if *logicalMode {
				err = tailLogical(e.ctx, store, sub, from, h)
			} else {
				err = sub.Run(e.ctx, from, h)
			}
			if err != nil && e.ctx.Err() == nil {
				return fmt.Errorf("%w (resume with -after %s)", err, cur)
			}
			e.note(map[string]any{"cursor": cur.String()}, "cursor %s", cur)
			return nil
		}
	},
}

// tailReader names tail's subscription (and, with -logical, its slot).
const tailReader = "pgdcb-tail"

// checkLogical refuses, at once, a server or role that logical decoding
// cannot run on: the reader would retry opening its stream for ever,
// printing nothing.
func checkLogical(ctx context.Context, store *eventstore.Store) error {
	var walLevel, role string
	var replication bool
	err := store.Pool().QueryRow(ctx, `SELECT current_setting('wal_level'), current_user,
		(SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user)`).Scan(&walLevel, &role, &replication)
	if err != nil {
		return fmt.Errorf("read wal_level: %w", err)
	}
	if walLevel != "logical" {
		return fmt.Errorf("%w: wal_level is %s; -logical needs wal_level=logical: run ALTER SYSTEM SET wal_level = logical and restart the server (or tail without -logical)",
			errPrecondition, walLevel)
	}
	if !replication {
		return fmt.Errorf("%w: role %s may not replicate; -logical needs a role with REPLICATION: run ALTER ROLE %s REPLICATION (or tail without -logical)",
			errPrecondition, role, pgx.Identifier{role}.Sanitize())
	}
	return nil
}

// tailLogical runs sub in logical decoding mode from cursor from on a new
// slot, refused while another tail streams from it, and drops the slot
// when it returns.
func tailLogical(ctx context.Context, store *eventstore.Store, sub *subscription.Subscription, from cursor.Cursor, h subscription.Handler) error {
	slot := logical.SlotName(store.Schema(), tailReader)
	st, err := logical.GetSlotStatus(ctx, store.Pool(), slot)
	if err != nil {
		return err
	}
	if st.Active {
		return fmt.Errorf("pgdcb: tail -logical: replication slot %s is in use: another tail -logical follows schema %s", slot, store.Schema())
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = logical.DropSlot(dctx, store.Pool(), slot)
	}()
	return sub.RunLogical(ctx, logical.Checkpoint{}, from, h)
}
