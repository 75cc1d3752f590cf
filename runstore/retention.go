package runstore

import (
	"context"
	"encoding/json"
	"io"

	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/tags"
)

// DeleteRun is retention: it deletes every event of the run through the
// store's retention function (delete_events_tagged('run_id=<id>')) and the
// run's snapshot, in one transaction that takes the projector's lock, so a
// projector batch can neither resurrect the snapshot nor see half a run.
// Events are otherwise never updated or deleted. Do not append to a run after
// deleting it.
//
// Retention is the schema owner's: call it on a Store whose pool connects as
// the role that ran the migrations. A role granted with sql.Grant (`pgdcb
// grant`) gets a permission error (SQLSTATE 42501) and deletes nothing; see
// docs/SECURITY.md.
func (s *Store) DeleteRun(ctx context.Context, runID string) (int64, error) {
	if err := validateRunID(runID); err != nil {
		return 0, err
	}
	var n int64
	err := pgx.BeginTxFunc(ctx, s.es.Pool(), pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.sql.projectorLock, s.es.Schema(), s.cfg.ProjectorName); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, s.sql.deleteRun, tags.Must(tagRunID, runID).String()).Scan(&n); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, s.sql.deleteSnapshot, runID)
		return err
	})
	if err != nil {
		return 0, errfmt.Errorf("pgdcb: runstore: delete run %q: %w", runID, err)
	}
	s.cache.drop(runID)
	return n, nil
}

// ExportRun is the archive export: it writes the run's events in runSeq order
// as JSON lines (one CanonicalEngineEvent, with runSeq and persistedAt, per
// line) and returns how many it wrote. It reads in pages of MaxFetchLimit.
func (s *Store) ExportRun(ctx context.Context, runID string, w io.Writer) (int64, error) {
	if err := validateRunID(runID); err != nil {
		return 0, err
	}
	if w == nil {
		return 0, invalid("w", "nil io.Writer")
	}
	enc := json.NewEncoder(w)
	var n, after int64
	for {
		evs, err := s.FetchEvents(ctx, runID, &FetchOptions{AfterSeq: after, Limit: s.cfg.MaxFetchLimit})
		if err != nil {
			return n, err
		}
		for _, ev := range evs {
			if err := enc.Encode(ev); err != nil {
				return n, errfmt.Errorf("pgdcb: runstore: export run %q: %w", runID, err)
			}
			n++
			after = ev.RunSeq
		}
		if len(evs) < s.cfg.MaxFetchLimit {
			return n, nil
		}
	}
}
