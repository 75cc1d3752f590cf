package effects

import (
	"context"
	"time"

	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/ident"
)

// Purge is retention: it deletes every event of each effect that finished
// (completed or failed for good) before the given time, through the store's
// retention function (delete_events_tagged('effect_id=<id>')), one effect per
// transaction. It returns the number of effects and events deleted.
//
// A purged effect is forgotten: Effect then returns ErrNotFound, and a
// new request with its DedupeKey creates a new effect. Keep finished effects
// at least as long as duplicates of their requests can arrive.
//
// Retention is the schema owner's: call it on a store whose pool connects as
// the role that ran the migrations (docs/SECURITY.md); another role gets a
// permission error (SQLSTATE 42501) and deletes nothing.
func (q *Queue) Purge(ctx context.Context, finishedBefore time.Time) (purged int, events int64, err error) {
	f, err := q.all(ctx)
	if err != nil {
		return 0, 0, errfmt.Errorf("pgdcb: effects: purge: %w", err)
	}
	stmt := "SELECT " + ident.Schema(q.store) + ".delete_events_tagged($1)"
	for _, e := range f.byID {
		if !e.Finished() || !e.FinishedAt.Before(finishedBefore) {
			continue
		}
		var n int64
		if err := q.store.Pool().QueryRow(ctx, stmt, idTag(e.ID).String()).Scan(&n); err != nil {
			return purged, events, errfmt.Errorf("pgdcb: effects: purge effect %s: %w", e.ID, err)
		}
		purged++
		events += n
	}
	return purged, events, nil
}
