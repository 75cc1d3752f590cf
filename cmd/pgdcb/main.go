// Command pgdcb administers a pgdcb event store from the shell: migrations and
// their status, reading, appending, exporting, importing and following events,
// projections, and the repair of a restored log.
//
//	pgdcb [-dsn URL] [-schema NAME] [-json] COMMAND [flags] [args]
//	pgdcb help [COMMAND]
//
// Run `pgdcb -h` for the commands and `pgdcb COMMAND -h` for one command's
// flags. Flags, global or the command's, may come before or after the command
// and between its arguments (`pgdcb projections reset -checkpoint-only NAME`); after
// "--" everything is an argument. Arguments a command does not take are
// refused.
//
// The database: -dsn URL (a URL or a key=value connection string), else
// $PGDCB_DATABASE_URL, else $DATABASE_URL, else the libpq variables (PGHOST,
// PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE, ...) when any is set.
// Those variables also fill in what a URL leaves out (pgx's ParseConfig, as
// libpq does): the URL's own settings win. migrate, rebase-xids and grant run
// as the schema's owner; grant gives an application role what it needs and
// nothing more (see sql.Grant and docs/SECURITY.md).
//
// Under -json, every output is JSON: results on stdout, and on stderr the
// final cursor, progress reports and errors ({"error": "...", "exit_code": N}).
//
// Exit codes: 0 success; 1 operational failure (connection, server, I/O);
// 2 usage error (unknown command or flag, extra argument, invalid DSN, tag,
// query, cursor, event or argument); 3 the schema needs attention
// (migrations pending, schema check failed, transaction ids ahead of the
// server); 4 an append condition failed (-if-none); 5 the append was already
// applied (-idempotency or a duplicate event id); 6 a precondition of the
// command failed (import into a log that is not empty, without -force; tail
// -logical on a server or role that cannot decode logically).
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
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Exit codes.
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitSchema    = 3
	exitCondition = 4
	exitApplied   = 5
	// exitPrecondition: the database is not in the state the command needs
	// (errPrecondition).
	exitPrecondition = 6
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs the command line args and returns the exit code; errors go to
// stderr with one "pgdcb:" prefix and the name of the failed operation.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := newEnv(ctx, stdin, stdout, stderr)
	err := executeEnv(e, args)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	var u *usageError
	isUsage := errors.As(err, &u)
	if e.json {
		v := map[string]any{"error": message(err), "exit_code": code}
		if isUsage {
			v["usage"] = "pgdcb " + u.cmdPrefix() + "-h"
		}
		_ = json.NewEncoder(stderr).Encode(v)
		return code
	}
	fmt.Fprintln(stderr, "pgdcb: "+message(err))
	if isUsage {
		fmt.Fprintf(stderr, "Run 'pgdcb %s-h' for usage.\n", u.cmdPrefix())
	}
	return code
}

// dsnVars are the variables a DSN is taken from when -dsn is not given, in
// order of precedence.
var dsnVars = []string{"PGDCB_DATABASE_URL", "DATABASE_URL"}

// libpqVars are the libpq connection variables pgx honours (ParseConfig):
// when -dsn and dsnVars are all unset, any of them set means "connect as
// they say" (an empty DSN).
var libpqVars = []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD",
	"PGPASSFILE", "PGSERVICE", "PGSERVICEFILE", "PGSSLMODE", "PGAPPNAME", "PGCONNECT_TIMEOUT"}

// envDSN returns the default DSN and the variable it came from: the first
// of dsnVars set, else "" (source "libpq" when a libpq variable is set,
// "" when nothing is).
func envDSN(getenv func(string) string) (dsn, source string) {
	for _, v := range dsnVars {
		if d := getenv(v); d != "" {
			return d, v
		}
	}
	for _, v := range libpqVars {
		if getenv(v) != "" {
			return "", "libpq"
		}
	}
	return "", ""
}

// message is err's text with the library's "pgdcb: " prefixes removed, so
// that the output has one.
func message(err error) string {
	return errfmt.Trim(err.Error())
}

func exitCode(err error) int {
	var u *usageError
	switch {
	case errors.As(err, &u):
		return exitUsage
	case errors.Is(err, errSchemaAttention), errors.Is(err, pgdcb.ErrNotMigrated), errors.Is(err, pgdcb.ErrTransactionIDsAhead):
		return exitSchema
	case errors.Is(err, pgdcb.ErrConditionFailed):
		return exitCondition
	case errors.Is(err, pgdcb.ErrIdempotent):
		return exitApplied
	case errors.Is(err, errPrecondition):
		return exitPrecondition
	case errors.Is(err, pgdcb.ErrInvalidArgument), errors.Is(err, pgdcb.ErrInvalidTag),
		errors.Is(err, pgdcb.ErrInvalidQuery), errors.Is(err, pgdcb.ErrInvalidCursor),
		errors.Is(err, pgdcb.ErrInvalidEvent), errors.Is(err, pgdcb.ErrInvalidSchema):
		return exitUsage
	}
	return exitFailure
}

// errSchemaAttention: status found the schema not current or not healthy.
var errSchemaAttention = errors.New("the schema needs attention")

// errPrecondition: the database is not in the state the command needs
// (exit 6).
var errPrecondition = errors.New("refused")

// usageError is a command line the program cannot run. Its text does not
// name the command (errfmt.Wrap does); cmd is for the hint to its usage.
type usageError struct {
	cmd string // "" for the top level
	err error
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }
func (e *usageError) cmdPrefix() string {
	if e.cmd == "" {
		return ""
	}
	return e.cmd + " "
}

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// env is what a command runs with.
type env struct {
	ctx            context.Context
	dsn, schema    string
	json           bool
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	pool           *pgxpool.Pool
}

// connect opens the pool and checks that the server answers.
func (e *env) connect() error {
	if e.dsn == "" {
		if _, src := envDSN(os.Getenv); src != "libpq" {
			return &usageError{err: errors.New("no database: pass -dsn URL, or set PGDCB_DATABASE_URL, DATABASE_URL or the PG* variables (PGHOST, PGDATABASE, ...)")}
		}
	}
	if err := pgdcbsql.ValidateSchema(e.schema); err != nil {
		return &usageError{err: err}
	}
	// An empty DSN is the libpq variables' (pgx reads PGHOST etc. into any
	// config, under what the DSN itself sets).
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		return &usageError{err: fmt.Errorf("invalid -dsn: %w", err)}
	}
	pool, err := pgxpool.NewWithConfig(e.ctx, cfg)
	if err != nil {
		return errfmt.Wrap("connect", onceLines{err})
	}
	if err := pool.Ping(e.ctx); err != nil {
		pool.Close()
		return errfmt.Wrap("connect", onceLines{err})
	}
	e.pool = pool
	return nil
}

// onceLines is err with each line of its text said once (a line that ends
// an earlier one counts as said): pgx lists every attempt of a connection
// (with sslmode=prefer, TLS then plain text), so an unreachable host's dial
// error came twice.
type onceLines struct{ err error }

func (o onceLines) Unwrap() error { return o.err }

func (o onceLines) Error() string {
	lines := strings.Split(o.err.Error(), "\n")
	out := lines[:0]
	seen := map[string]bool{}
next:
	for _, l := range lines {
		k := strings.TrimSpace(l)
		if seen[k] {
			continue
		}
		for s := range seen { // "hostname resolving error: X", then X
			if strings.HasSuffix(s, ": "+k) {
				continue next
			}
		}
		seen[k] = true
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}

// store opens the event store and checks its schema. It has no upcasters
// (eventstore.Config.Upcasters: the application's Go code): read, tail and
// export give events as stored, and import and append record no version
// but the one an event carries (docs/LIFECYCLE.md, "Evolving events").
func (e *env) store() (*eventstore.Store, error) {
	store, err := eventstore.New(e.pool, &eventstore.Config{Schema: e.schema})
	if err != nil {
		return nil, err
	}
	if err := store.CheckSchema(e.ctx); err != nil {
		return nil, errfmt.Wrap("check schema", err)
	}
	return store, nil
}

// command is one subcommand.
type command struct {
	name    string
	args    string // the synopsis after the name
	summary string
	detail  string // more lines for `pgdcb NAME -h`
	noDB    bool
	// minArgs and maxArgs bound the positional arguments.
	minArgs, maxArgs int
	// flags declares the command's flags and returns its body.
	flags func(fs *flag.FlagSet) func(e *env) error
}

var commands []*command

func init() {
	commands = []*command{
		versionCmd, migrateCmd, sqlCmd, statusCmd, grantCmd, rebaseCmd, headCmd,
		readCmd, appendCmd, exportCmd, importCmd, tailCmd, projectionsCmd, eraseCmd,
		doctorCmd, // doctor.go
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

const exitCodesText = `Exit codes:
  0  success
  1  operational failure (connection, server, I/O)
  2  usage error (unknown command or flag, extra argument; invalid DSN, tag, query, cursor, event)
  3  the schema needs attention (migrations pending, schema check failed, transaction ids ahead)
  4  append condition failed (-if-none)
  5  append already applied (-idempotency, or an event id already stored)
  6  precondition failed (import into a log that is not empty, without -force;
     tail -logical without wal_level=logical or a REPLICATION role)
`

const querySyntaxText = `Query syntax (-query, -if-none, -idempotency): items separated by ';' (OR),
each TYPES:TAGS with comma-separated types (any of) and tags (all of); either
side may be empty but not both, e.g. 'Opened,Closed:account=1;:region=eu' or
'Opened' (an empty item, as in 'A;' or ':', is refused). '*' is every event. A value starting with '[' is JSON:
[{"types":["Opened"],"tags":["account=1"]}].
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, `pgdcb administers a pgdcb event store on PostgreSQL.

Usage:
  pgdcb [-dsn URL] [-schema NAME] [-json] COMMAND [flags] [args]
  pgdcb help [COMMAND]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help         this text, or a command's usage

Flags, global or a command's, go before or after the command and between its
arguments ("--" ends them). Global flags:
  -dsn URL      PostgreSQL URL or key=value string (default $PGDCB_DATABASE_URL,
                else $DATABASE_URL, else the PG* variables: PGHOST, PGPORT,
                PGDATABASE, PGUSER, PGPASSWORD, PGSSLMODE; these also fill in
                what the URL leaves out)
  -schema NAME  schema of the store (default "`+pgdcbsql.DefaultSchema+`")
  -json         machine-readable output: JSON results on stdout, and JSON
                errors, cursors and progress on stderr (read, export and tail
                always write NDJSON events)

`+exitCodesText)
}

func printCommandUsage(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: pgdcb [global flags] %s %s\n\n%s\n", c.name, c.args, c.summary)
	if c.detail != "" {
		fmt.Fprintf(w, "\n%s", c.detail)
	}
	fs := newFlagSet(c.name, &env{schema: pgdcbsql.DefaultSchema})
	c.flags(fs)
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// newFlagSet returns a silent flag set with the global flags bound to e.
func newFlagSet(name string, e *env) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&e.dsn, "dsn", e.dsn, "PostgreSQL URL (default $PGDCB_DATABASE_URL, $DATABASE_URL, then the PG* variables)")
	fs.StringVar(&e.schema, "schema", e.schema, "schema of the store")
	fs.BoolVar(&e.json, "json", e.json, "machine-readable output")
	return fs
}

// parseInterleaved parses args with fs, letting flags and arguments mix
// (`reset -checkpoint-only NAME`, `reset NAME -checkpoint-only`); after "--" everything is an
// argument. It returns the arguments in order.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// newEnv returns the environment of a command line before its flags.
func newEnv(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer) *env {
	e := &env{ctx: ctx, schema: pgdcbsql.DefaultSchema, stdin: stdin, stdout: stdout, stderr: stderr}
	e.dsn, _ = envDSN(os.Getenv)
	return e
}

// execute runs the command line args.
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return executeEnv(newEnv(ctx, stdin, stdout, stderr), args)
}

// executeEnv runs the command line args in e (whose json field then says
// whether -json was given).
func executeEnv(e *env, args []string) error {
	stdout := e.stdout
	global := newFlagSet("pgdcb", e)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout)
			return nil
		}
		return &usageError{err: err}
	}
	if global.NArg() == 0 {
		return &usageError{err: errors.New("no command given")}
	}
	name, rest := global.Arg(0), global.Args()[1:]
	if name == "help" {
		switch len(rest) {
		case 0:
			printUsage(stdout)
			return nil
		case 1:
			c := lookup(rest[0])
			if c == nil {
				return &usageError{err: fmt.Errorf("help: unknown command %q", rest[0])}
			}
			printCommandUsage(stdout, c)
			return nil
		}
		return &usageError{err: fmt.Errorf("help: unexpected arguments %q", rest[1:])}
	}
	c := lookup(name)
	if c == nil {
		return &usageError{err: fmt.Errorf("unknown command %q", name)}
	}
	fs := newFlagSet(name, e)
	body := c.flags(fs)
	pos, err := parseInterleaved(fs, rest)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, c)
			return nil
		}
		return errfmt.Wrap(name, &usageError{cmd: name, err: err})
	}
	e.args = pos
	err = runCommand(c, e, body)
	var u *usageError
	if errors.As(err, &u) {
		u.cmd = name
	}
	return errfmt.Wrap(name, err)
}

func runCommand(c *command, e *env, body func(*env) error) error {
	if n := len(e.args); n < c.minArgs || n > c.maxArgs {
		if n > c.maxArgs {
			return usagef("unexpected arguments %q", e.args[c.maxArgs:])
		}
		return usagef("missing arguments: %s", c.args)
	}
	if !c.noDB {
		if err := e.connect(); err != nil {
			return err
		}
		defer e.pool.Close()
	}
	return body(e)
}
