package projection_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// logRecorder is a slog.Handler keeping every record.
type logRecorder struct {
	mu      sync.Mutex
	records []slog.Record
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

func (h *logRecorder) all() []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]slog.Record(nil), h.records...)
}

// A failing batch is logged at Warn with the error under "err"; every
// record carrying an error is at Warn or above and uses that key.
func TestFailuresAreLoggedAtWarnWithErr(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	h := &logRecorder{}
	cfg := *fast
	cfg.MaxAttempts = 2
	cfg.Logger = slog.New(h)
	boom := errors.New("read model unavailable")
	r, err := projection.New(s, "logs", query.Tagged([]string{"P"}),
		func(context.Context, pgx.Tx, []pgdcb.StoredEvent) error { return boom }, &cfg)
	require.NoError(t, err)
	appendN(t, s, "P", 3, 3)
	start(t, r)
	require.Eventually(t, func() bool {
		st, err := r.Status(context.Background())
		return err == nil && st.State == projection.Failed
	}, wait, 5*time.Millisecond)

	var failed int
	for _, rec := range h.all() {
		rec.Attrs(func(a slog.Attr) bool {
			if e, ok := a.Value.Any().(error); ok {
				require.Equal(t, "err", a.Key, "%q: an error under another key", rec.Message)
				require.GreaterOrEqual(t, rec.Level, slog.LevelWarn, "%q: an error logged below Warn", rec.Message)
				if rec.Message == "pgdcb: projection: batch failed" && errors.Is(e, boom) {
					failed++
				}
			}
			return true
		})
	}
	require.Positive(t, failed, "the failing batch was logged with its error")
}
