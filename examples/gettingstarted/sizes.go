package gettingstarted

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// CourseSizes returns the projection keeping table course_sizes (in the
// store's schema here; any table of yours will do) up to date. Each batch of
// events and the projection's checkpoint commit in one transaction: every
// event is applied exactly once, even across crashes.
func CourseSizes(ctx context.Context, store *eventstore.Store) (*projection.Runner, error) {
	table := pgx.Identifier{store.Schema(), "course_sizes"}.Sanitize()
	_, err := store.Pool().Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+
		` (course text PRIMARY KEY, students int NOT NULL)`)
	if err != nil {
		return nil, err
	}
	apply := func(ctx context.Context, tx pgx.Tx, events []pgdcb.StoredEvent) error {
		for _, ev := range events {
			course, _ := ev.Tags.Get("course")
			if _, err := tx.Exec(ctx, `INSERT INTO `+table+` VALUES ($1, 1)
				ON CONFLICT (course) DO UPDATE SET students = course_sizes.students + 1`, course); err != nil {
				return err // rolls the batch back; it is retried with backoff
			}
		}
		return nil
	}
	return projection.New(store, "course_sizes", query.Tagged([]string{"StudentSubscribed"}), apply,
		&projection.Config{Reset: func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `TRUNCATE `+table) // Runner.Reset: empty it, replay the log
			return err
		}})
}
