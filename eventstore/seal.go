package eventstore

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/seal"
)

// maxSealAttempts bounds how often a sealed append makes a key for a
// subject whose key an Erase destroyed between making and locking it.
const maxSealAttempts = 5

// appendSealed appends events that carry personal fields of subjects
// (validated events; docs/LIFECYCLE.md, "Erasing a person's data"). In tx,
// or (nil) in a READ COMMITTED transaction of its own on the pool, it takes
// each subject's lock in shared mode, reads the subjects' keys (making the
// missing ones), seals the marked values under them and appends, holding
// the locks to the commit: an Erase (which takes a subject's lock in
// exclusive mode) either commits before, and the append makes a new key, or
// waits for the commit, and erases what was appended. Such appends are not
// grouped (Config.GroupCommitDisabled) and not settled: a lost commit
// returns an error matching pgdcb.ErrOutcomeUnknown.
func (s *Store) appendSealed(ctx context.Context, tx pgx.Tx, events []pgdcb.Event, subjects []string, cond *appendif.Condition) (res pgdcb.AppendResult, err error) {
	if s.cfg.KEK == nil {
		return pgdcb.AppendResult{}, &pgdcb.InvalidArgumentError{Name: "Config.KEK",
			Reason: "events carry personal fields (pgdcb.Personal): set a KeyWrapper to seal them"}
	}
	own := tx == nil
	if own {
		if tx, err = s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}); err != nil {
			return pgdcb.AppendResult{}, errf("append", err)
		}
		defer func() {
			if err != nil {
				_ = tx.Rollback(context.WithoutCancel(ctx))
			}
		}()
	}
	var keys map[string]seal.Key
	for attempt := 1; ; attempt++ {
		var missing []string
		keys, missing, err = s.keys.lockKeys(ctx, tx, subjects)
		if err != nil {
			return pgdcb.AppendResult{}, errf("append: subject keys", err)
		}
		if len(missing) == 0 {
			break
		}
		if attempt == maxSealAttempts {
			return pgdcb.AppendResult{}, fmt.Errorf("pgdcb: append: subject keys: %d attempts, keys of %q erased each time", attempt, missing)
		}
		// Made on the pool while this transaction holds the subjects'
		// locks in shared mode (which an insert does not wait for); the
		// next read, a new statement, sees them.
		if err := s.keys.create(ctx, missing); err != nil {
			return pgdcb.AppendResult{}, errf("append: subject keys", err)
		}
	}
	sealed := make([]pgdcb.Event, len(events))
	for i, e := range events {
		if e.Data, err = seal.Seal(e.Data, keys); err == nil {
			e.Metadata, err = seal.Seal(e.Metadata, keys)
		}
		if err != nil {
			return pgdcb.AppendResult{}, &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: err.Error()}
		}
		sealed[i] = e
	}
	if res, err = s.appendEvents(ctx, tx, sealed, cond, false, uuid.Nil); err != nil || !own {
		return res, err
	}
	if err = commitTx(ctx, tx); err != nil {
		return pgdcb.AppendResult{}, errfmt.Wrap("append", err)
	}
	s.Notify(ctx)
	return res, nil
}
