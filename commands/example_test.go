package commands_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	pgdcb "github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// Reserve a seat at most once: the handler decides from the seat's events and
// returns the condition Project gave it; the executor appends under it,
// re-deciding on conflicts, and records the command.
func Example() {
	ctx := context.Background()
	pool, _ := pgxpool.New(ctx, os.Getenv("PGDCB_TEST_DATABASE_URL"))
	defer pool.Close()
	schema := "pgdcb_example_commands"
	_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	defer pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") //nolint:errcheck
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		fmt.Println(err)
		return
	}
	store, _ := eventstore.New(pool, &eventstore.Config{Schema: schema})
	ex, _ := commands.New(store, nil)

	reserve := commands.HandlerFunc(func(ctx context.Context, dc *commands.DecideContext) ([]pgdcb.Event, appendif.Condition, error) {
		taken := pgdcb.NewModel(query.Tagged([]string{"SeatReserved"}, "seat=12A"), false,
			func(bool, pgdcb.StoredEvent) bool { return true })
		cond, err := dc.Project(ctx, taken)
		if err != nil {
			return nil, cond, err
		}
		if taken.State {
			return nil, cond, fmt.Errorf("seat 12A is taken")
		}
		ev, err := pgdcb.NewEvent("SeatReserved", map[string]string{"by": "ann"}, "seat=12A")
		return []pgdcb.Event{ev}, cond, err
	})

	id := uuid.New()
	out, err := ex.Execute(ctx, commands.Command{ID: id, Type: "ReserveSeat", Handler: reserve})
	fmt.Println(len(out.Events), err)
	again, err := ex.Execute(ctx, commands.Command{ID: id, Type: "ReserveSeat", Handler: reserve})
	fmt.Println(again.Duplicate, again.TransactionID == out.TransactionID, err)
	_, err = ex.Execute(ctx, commands.Command{Type: "ReserveSeat", Handler: reserve})
	fmt.Println(err)
	// Output:
	// 1 <nil>
	// true true <nil>
	// pgdcb: commands: ReserveSeat rejected: seat 12A is taken
}
