package wallet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
)

// An error whose outcome is unknown (the write may or may not have committed)
// is 503 outcome_unknown with Retry-After, telling the client to retry with
// the same Idempotency-Key; it wins over the cause it wraps.
func TestWriteErrorOutcomeUnknown(t *testing.T) {
	t.Parallel()
	for _, err := range []error{
		pgdcb.ErrOutcomeUnknown,
		fmt.Errorf("commands: commit: %w", pgdcb.ErrOutcomeUnknown),
		&pgdcb.OutcomeUnknownError{Op: "commit", Err: errors.New("connection reset by peer")},
		fmt.Errorf("commands: Deposit: %w", &pgdcb.OutcomeUnknownError{Op: "commit", Err: context.DeadlineExceeded}),
		&commands.RejectedError{Type: CmdDeposit, Err: &pgdcb.OutcomeUnknownError{Op: "append", Err: context.Canceled}},
	} {
		t.Run(err.Error(), func(t *testing.T) {
			rec := httptest.NewRecorder()
			writeError(rec, err)
			require.Equal(t, 503, rec.Code, "%v", err)
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
			require.NotEmpty(t, rec.Header().Get("Retry-After"))
			var body Problem
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &body))
			require.Equal(t, "outcome_unknown", body.Code)
			require.Contains(t, body.Detail, "same Idempotency-Key")
		})
	}
	// Errors that certainly wrote nothing keep their own mapping.
	rec := httptest.NewRecorder()
	writeError(rec, context.DeadlineExceeded)
	require.Equal(t, 503, rec.Code)
	require.Empty(t, rec.Header().Get("Retry-After"))
	require.False(t, strings.Contains(rec.Body.String(), "outcome_unknown"))
}
