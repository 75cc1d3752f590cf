package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// export waits for a transaction that holds the horizon below events
// committed before it started, rather than stopping short of them.
func TestExportWaitsForTheHorizon(t *testing.T) {
	src, _ := db(t)
	require.Equal(t, 0, src("", "migrate").code)
	ctx := context.Background()
	open, err := pgtest.Pool(t).Begin(ctx)
	require.NoError(t, err)
	defer open.Rollback(ctx)
	require.NoError(t, open.QueryRow(ctx, "SELECT pg_current_xact_id() IS NOT NULL").Scan(new(bool)))

	var in strings.Builder
	for i := range 5 {
		fmt.Fprintf(&in, `{"type":"T","tags":["all=yes"],"data":{"i":%d}}`+"\n", i)
	}
	require.Equal(t, 0, src(in.String(), "append", "-stdin").code)

	done := make(chan result, 1)
	go func() { done <- src("", "export", "-query", ":all=yes") }()
	select {
	case r := <-done:
		t.Fatalf("export ended while the horizon was held: code %d, %d lines", r.code, len(lines(r.stdout)))
	case <-time.After(1500 * time.Millisecond):
	}
	require.NoError(t, open.Rollback(ctx))
	r := <-done
	require.Equal(t, 0, r.code, r.stderr)
	require.Len(t, lines(r.stdout), 5)
	require.Contains(t, r.stderr, "waiting for transaction")
}
