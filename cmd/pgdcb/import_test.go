package main

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// logPoint is the part of an exported line that is the log's own: the
// target assigns its positions and transaction ids.
var logPoint = regexp.MustCompile(`^\{"position":\d+,"transaction_id":\d+,`)

// normalized is an export without positions and transaction ids, and the
// sizes of its source transactions (runs of one transaction_id), in order.
func normalized(t *testing.T, export string) (lines []string, groups []int) {
	t.Helper()
	var last uint64
	for _, l := range strings.Split(strings.TrimSuffix(export, "\n"), "\n") {
		var p struct {
			TransactionID uint64 `json:"transaction_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &p), l)
		require.NotZero(t, p.TransactionID, l)
		if len(groups) == 0 || p.TransactionID != last {
			groups = append(groups, 0)
		}
		groups[len(groups)-1]++
		last = p.TransactionID
		require.Regexp(t, logPoint, l)
		lines = append(lines, logPoint.ReplaceAllString(l, "{"))
	}
	return lines, groups
}

// sourceLog writes transactions of 1, 3, 1, 1200 (more than a batch of the
// target's store, 1000), 7 and 2 events: ids on some, metadata on some,
// JSON null data and metadata, tag-less events.
func sourceLog(t *testing.T) (run func(stdin string, args ...string) result, groups []int) {
	t.Helper()
	ctx := context.Background()
	src, schema := db(t)
	require.Equal(t, 0, src("", "migrate").code)
	store, err := eventstore.New(pgtest.Pool(t), &eventstore.Config{Schema: schema, MaxBatchSize: 2000})
	require.NoError(t, err)
	k := 0
	for _, size := range []int{1, 3, 1, 1200, 7, 2} {
		var evs []pgdcb.Event
		for range size {
			k++
			ev := pgdcb.MustEvent(fmt.Sprintf("T%d", k%4), map[string]any{"k": k, "s": "x\u00e9"}, fmt.Sprintf("n=%d", k), "all=yes")
			switch k % 5 {
			case 0:
				ev.ID = uuid.New()
				ev.Metadata = json.RawMessage(`{"correlation_id": "c", "n": 1.50}`)
			case 1:
				ev.Data = json.RawMessage(`null`)
				ev.Metadata = json.RawMessage(`null`)
			case 2:
				ev.Tags = pgdcb.Event{}.Tags
			}
			evs = append(evs, ev)
		}
		_, err := store.Append(ctx, evs)
		require.NoError(t, err)
	}
	return src, []int{1, 3, 1, 1200, 7, 2}
}

// export → import into a fresh schema → export gives the same lines, byte
// for byte, once positions and transaction ids (the target's) are taken
// out, and the same transactions: recorded times, ids, metadata, order and
// grouping survive. Before #38 §3 the import stamped its own time and cut
// the log into batches of its own: this failed on both.
func TestImportRoundTripIsFaithful(t *testing.T) {
	t.Parallel()
	src, groups := sourceLog(t)
	r := src("", "export")
	require.Equal(t, 0, r.code, r.stderr)
	first := r.stdout
	lines1, groups1 := normalized(t, first)
	require.Equal(t, groups, groups1, "the source's transactions")

	dst, _ := db(t)
	require.Equal(t, 0, dst("", "migrate").code)
	r = dst(first, "import", "-batch", "100", "-async-commit", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)

	r = dst("", "export")
	require.Equal(t, 0, r.code, r.stderr)
	lines2, groups2 := normalized(t, r.stdout)
	require.Equal(t, len(lines1), len(lines2))
	for i := range lines1 {
		require.Equal(t, lines1[i], lines2[i], "line %d", i+1)
	}
	require.Equal(t, groups1, groups2, "one target transaction per source transaction, in order")
	require.EqualValues(t, 1214, m["imported"])
	require.EqualValues(t, len(groups), m["transactions"])
}

// An import that stops midway has committed whole source transactions only;
// -resume checks that the log holds the input's first events and imports
// the rest; a rerun without it stops at the first stored id (exit 5).
func TestImportResumes(t *testing.T) {
	t.Parallel()
	src, _ := sourceLog(t)
	r := src("", "export")
	require.Equal(t, 0, r.code, r.stderr)
	full := r.stdout
	all := lines(full)

	// A broken line inside the fourth transaction (events 6..1205).
	broken := strings.Join(all[:100], "\n") + "\n{not json\n" + strings.Join(all[100:], "\n") + "\n"
	dst, _ := db(t)
	require.Equal(t, 0, dst("", "migrate").code)
	r = dst(broken, "import")
	require.Equal(t, 2, r.code, r.stderr)
	require.Contains(t, r.stderr, "after 5 events imported in 3 transactions (stdin through line 5); the transaction from line 6 was not (pgdcb import -resume continues)")
	require.Len(t, lines(dst("", "read").stdout), 5, "whole transactions only")

	r = dst(full, "import")
	require.Equal(t, 6, r.code, r.stderr)
	require.Contains(t, r.stderr, "-resume")
	r = dst(full, "import", "-force")
	require.Equal(t, 5, r.code, "the first stored id refuses a rerun: %s", r.stderr)
	require.Len(t, lines(dst("", "read").stdout), 5)

	// Not this input: refused.
	r = dst(strings.Join(all[1:], "\n")+"\n", "import", "-resume")
	require.Equal(t, 6, r.code, r.stderr)
	require.Contains(t, r.stderr, "is not this input's import")

	r = dst(full, "import", "-resume", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.EqualValues(t, 5, m["skipped"])
	require.EqualValues(t, 1209, m["imported"])

	r = dst("", "export")
	require.Equal(t, 0, r.code, r.stderr)
	a, ga := normalized(t, full)
	b, gb := normalized(t, r.stdout)
	require.Equal(t, ga, gb)
	require.Equal(t, a, b)
}

// A source transaction larger than the store's MaxBatchBytes (16 MiB) is
// imported in several calls, in one transaction.
func TestImportSplitsALargeTransactionByBytes(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1000000)
	var in strings.Builder
	for i := range 17 {
		fmt.Fprintf(&in, `{"transaction_id":7,"type":"Big","tags":["n=%d"],"data":{"s":%q},"occurred_at":"2020-01-01T00:00:00.000001Z"}`+"\n", i, big)
	}
	dst, _ := db(t)
	require.Equal(t, 0, dst("", "migrate").code)
	r := dst(in.String(), "import", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	m := decode(t, r.stdout)
	require.EqualValues(t, 17, m["imported"])
	require.EqualValues(t, 1, m["transactions"])
}
