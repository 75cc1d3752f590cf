//go:build unix

package pgserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// StandbyOptions tune [Server.StartStandby]. The zero value is a standby that
// replays as fast as it can.
type StandbyOptions struct {
	// ApplyDelay is the standby's recovery_min_apply_delay: each commit
	// becomes visible there this long after it committed on the primary (a
	// lag injected on purpose, in whole milliseconds). Default 0: no delay.
	ApplyDelay time.Duration
	// Settings are extra server settings of the standby, as
	// Options.Settings (they override the throwaway defaults; one for
	// recovery_min_apply_delay would also override ApplyDelay and
	// SetApplyDelay). Default: none.
	Settings map[string]string
	// StartTimeout bounds the base backup and the start. Default: 60s.
	StartTimeout time.Duration
}

// StartStandby makes a streaming hot standby of a throwaway cluster: a base
// backup taken with `pg_basebackup -R -X stream` over loopback, started on a
// free port of 127.0.0.1 with the same binaries and defaults. The standby is
// itself a throwaway cluster (Crash, Stop, Start, Close work on it) that also
// answers [Server.WaitReplay] and [Server.Promote]. Close it before the
// primary. Only for a throwaway cluster (else a *NotThrowawayError).
func (s *Server) StartStandby(ctx context.Context, opts StandbyOptions) (*Server, error) {
	p, ok := s.ctl.(*cluster)
	if !ok {
		return nil, &NotThrowawayError{Op: "StartStandby", Source: s.source}
	}
	if opts.ApplyDelay < 0 {
		return nil, errors.New("pgserver: StartStandby: negative ApplyDelay")
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	// Queries on the standby are never cancelled by replay (they delay it
	// instead): a test's reads fail only for its own reasons.
	set := map[string]string{
		"hot_standby":                 "on",
		"hot_standby_feedback":        "off",
		"max_standby_streaming_delay": "-1",
	}
	for k, v := range opts.Settings {
		set[k] = v
	}
	settings, err := settingArgs(set)
	if err != nil {
		return nil, fmt.Errorf("pgserver: StartStandby: %w", err)
	}
	settings = append(append([]string(nil), p.settings...), settings...)
	st, err := newCluster(ctx, &Options{}, "pgdcb-pg-standby-", p.bin, p.cred, settings, timeout,
		func(ctx context.Context, dir, data string) error {
			if err := runChild(ctx, dir, p.cred, filepath.Join(filepath.Dir(p.bin.postgres), "pg_basebackup"),
				"-D", data, "-R", "-X", "stream", "-c", "fast", "--no-sync", "-d", p.dsn()); err != nil {
				return err
			}
			// The delay goes to postgresql.auto.conf (beside the
			// primary_conninfo that -R wrote), not to the command line, so
			// that SetApplyDelay (ALTER SYSTEM) can change it later.
			auto, err := os.OpenFile(filepath.Join(data, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(auto, "recovery_min_apply_delay = '%dms'\n", opts.ApplyDelay.Milliseconds())
			if cerr := auto.Close(); err == nil {
				err = cerr
			}
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("pgserver: StartStandby: %w", err)
	}
	return st, nil
}
