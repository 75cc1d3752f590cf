package pgserver

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// WALPosition returns the server's current WAL position: on a primary the
// end of the WAL written so far (pg_current_wal_lsn), on a standby the end of
// the WAL replayed (pg_last_wal_replay_lsn), as PostgreSQL's text form of a
// pg_lsn. Pass a primary's position to a standby's WaitReplay to wait until
// everything the primary had committed before it is visible there.
func (s *Server) WALPosition(ctx context.Context) (string, error) {
	var lsn string
	err := s.queryRow(ctx, `SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()
		ELSE pg_current_wal_insert_lsn() END)::text`, nil, &lsn)
	if err != nil {
		return "", fmt.Errorf("pgserver: WALPosition: %w", err)
	}
	return lsn, nil
}

// WaitReplay returns once the standby has replayed the WAL up to lsn (a
// pg_lsn in text form, e.g. from the primary's WALPosition), polling every
// 10ms until ctx ends. A standby with an apply delay makes commits visible
// only when replayed, so this includes the delay. On a server that is not in
// recovery (a primary, or a promoted standby) it returns at once.
func (s *Server) WaitReplay(ctx context.Context, lsn string) error {
	return s.pollUntil(ctx, "WaitReplay "+lsn, `SELECT NOT pg_is_in_recovery()
		OR coalesce(pg_last_wal_replay_lsn() >= $1::pg_lsn, false)`, lsn)
}

// Promote ends a standby's recovery and makes it a primary
// (pg_promote(wait => true)), returning once it accepts writes. Any server
// can be asked; a server that is not in recovery is an error of PostgreSQL's.
func (s *Server) Promote(ctx context.Context) error {
	var ok bool
	if err := s.queryRow(ctx, `SELECT pg_promote(true, 60)`, nil, &ok); err != nil {
		return fmt.Errorf("pgserver: Promote: %w", err)
	}
	if !ok {
		return fmt.Errorf("pgserver: Promote: the standby did not finish promotion within 60s")
	}
	return nil
}

// SetApplyDelay changes a standby's recovery_min_apply_delay (ALTER SYSTEM
// and a reload), returning once a new session shows the new value. Commits
// replayed after that are held back by d.
func (s *Server) SetApplyDelay(ctx context.Context, d time.Duration) error {
	want := fmt.Sprintf("%dms", d.Milliseconds())
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return fmt.Errorf("pgserver: SetApplyDelay: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `ALTER SYSTEM SET recovery_min_apply_delay = '`+want+`'`); err != nil {
		return fmt.Errorf("pgserver: SetApplyDelay: %w", err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		return fmt.Errorf("pgserver: SetApplyDelay: %w", err)
	}
	// The session reloads the configuration between statements once the
	// server did.
	return s.pollUntil(ctx, "SetApplyDelay "+want,
		`SELECT setting::bigint = $1 FROM pg_settings WHERE name = 'recovery_min_apply_delay'`, d.Milliseconds())
}

// InRecovery reports whether the server is a standby (pg_is_in_recovery).
func (s *Server) InRecovery(ctx context.Context) (bool, error) {
	var r bool
	if err := s.queryRow(ctx, `SELECT pg_is_in_recovery()`, nil, &r); err != nil {
		return false, fmt.Errorf("pgserver: InRecovery: %w", err)
	}
	return r, nil
}

func (s *Server) queryRow(ctx context.Context, sql string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}

// PauseReplay pauses a standby's WAL replay (pg_wal_replay_pause). Replay
// checks the request before each WAL record it applies, so from the return
// on the standby shows nothing the primary commits later, until
// ResumeReplay. It keeps receiving WAL.
func (s *Server) PauseReplay(ctx context.Context) error {
	if err := s.queryRow(ctx, `SELECT 1 FROM (SELECT pg_wal_replay_pause()) p`, nil, new(int)); err != nil {
		return fmt.Errorf("pgserver: PauseReplay: %w", err)
	}
	return nil
}

// ResumeReplay resumes a standby's WAL replay paused by PauseReplay.
func (s *Server) ResumeReplay(ctx context.Context) error {
	if err := s.queryRow(ctx, `SELECT 1 FROM (SELECT pg_wal_replay_resume()) r`, nil, new(int)); err != nil {
		return fmt.Errorf("pgserver: ResumeReplay: %w", err)
	}
	return nil
}

// Detach cuts a standby off its primary (primary_conninfo emptied and the
// configuration reloaded) and returns once primary (the standby's primary)
// shows no walsender: what the primary commits from then on never reaches
// the standby, as when a primary dies with WAL its standby never received.
// For failover tests.
func (s *Server) Detach(ctx context.Context, primary *Server) error {
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		return fmt.Errorf("pgserver: Detach: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, sql := range []string{`ALTER SYSTEM SET primary_conninfo = ''`, `SELECT pg_reload_conf()`} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			return fmt.Errorf("pgserver: Detach: %w", err)
		}
	}
	return primary.pollUntil(ctx, "Detach: the walsender stayed", `SELECT count(*) = 0 FROM pg_stat_replication`)
}

// pollUntil runs query, which returns one boolean, every 10ms on one
// connection to s until it returns true, or ctx ends: then the error, named
// after op, carries the last error seen. A connection that fails is opened
// again at the next poll (the server may be starting).
func (s *Server) pollUntil(ctx context.Context, op, query string, args ...any) error {
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			_ = conn.Close(context.WithoutCancel(ctx))
		}
	}()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if conn == nil {
			conn, last = pgx.Connect(ctx, s.dsn)
		}
		if last == nil {
			var done bool
			if last = conn.QueryRow(ctx, query, args...).Scan(&done); last == nil && done {
				return nil
			}
			if last != nil {
				_ = conn.Close(context.WithoutCancel(ctx))
				conn = nil
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("pgserver: %s: %w (last error: %v)", op, ctx.Err(), last)
			}
			return fmt.Errorf("pgserver: %s: %w", op, ctx.Err())
		case <-tick.C:
		}
	}
}
