package pgdcbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// ReadAll returns the whole log of the store, in log order. It fails the
// test when the read fails. Any store will do: the PostgreSQL store or the
// in-memory one.
func ReadAll(tb testing.TB, store pgdcb.Store) []pgdcb.StoredEvent {
	tb.Helper()
	evs, _, err := store.ReadAll(tb.Context(), query.All(), nil)
	if err != nil {
		tb.Fatalf("pgdcbtest: reading the log: %v", err)
	}
	return evs
}

// Select returns the events that q matches, in their order.
func Select(events []pgdcb.StoredEvent, q query.Query) []pgdcb.StoredEvent {
	var out []pgdcb.StoredEvent
	for _, ev := range events {
		if q.Matches(ev.Type, ev.Tags) {
			out = append(out, ev)
		}
	}
	return out
}

// RequireEvents fails the test unless got holds exactly the want events, in
// that order: each with want's type and exactly want's tags (ignoring tags
// whose key is in ignoreTagKeys, such as commands.CommandIDTagKey) and, when
// want.Data is not nil, JSON-equal data (key order and spacing do not
// matter). Metadata and ids are not compared. The failure message lists
// both sides.
func RequireEvents(tb testing.TB, got []pgdcb.StoredEvent, want []pgdcb.Event, ignoreTagKeys ...string) {
	tb.Helper()
	if msg := DiffEvents(got, want, ignoreTagKeys...); msg != "" {
		tb.Fatalf("pgdcbtest: %s", msg)
	}
}

// DiffEvents is RequireEvents' comparison: "" when got matches want,
// otherwise what differs, with both lists.
func DiffEvents(got []pgdcb.StoredEvent, want []pgdcb.Event, ignoreTagKeys ...string) string {
	var diffs []string
	for i := range max(len(got), len(want)) {
		switch {
		case i >= len(got):
			diffs = append(diffs, fmt.Sprintf("event %d: missing, want %s", i, formatEvent(want[i], ignoreTagKeys)))
		case i >= len(want):
			diffs = append(diffs, fmt.Sprintf("event %d: unexpected %s", i, formatEvent(got[i].Event, ignoreTagKeys)))
		default:
			if why := mismatch(got[i].Event, want[i], ignoreTagKeys); why != "" {
				diffs = append(diffs, fmt.Sprintf("event %d: %s", i, why))
			}
		}
	}
	if len(diffs) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("events differ:\n  " + strings.Join(diffs, "\n  ") + "\ngot:")
	for _, ev := range got {
		b.WriteString("\n  " + formatEvent(ev.Event, ignoreTagKeys))
	}
	b.WriteString("\nwant:")
	for _, ev := range want {
		b.WriteString("\n  " + formatEvent(ev, ignoreTagKeys))
	}
	return b.String()
}

// mismatch says why got does not match want, or "".
func mismatch(got, want pgdcb.Event, ignore []string) string {
	if got.Type != want.Type {
		return fmt.Sprintf("type %s, want %s", got.Type, want.Type)
	}
	gt, wt := tagStrings(got, ignore), tagStrings(want, ignore)
	if !slices.Equal(gt, wt) {
		return fmt.Sprintf("%s: tags %v, want %v", got.Type, gt, wt)
	}
	if want.Data != nil && !jsonEqual(got.Data, want.Data) {
		return fmt.Sprintf("%s: data %s, want %s", got.Type, got.Data, want.Data)
	}
	return ""
}

// tagStrings are the event's tags (sorted) without the ignored keys.
func tagStrings(ev pgdcb.Event, ignore []string) []string {
	var out []string
	for _, t := range ev.Tags.Tags() {
		if !slices.Contains(ignore, t.Key()) {
			out = append(out, t.String())
		}
	}
	slices.Sort(out)
	return out
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(x)
	cb, _ := json.Marshal(y)
	return bytes.Equal(ca, cb)
}

func formatEvent(ev pgdcb.Event, ignore []string) string {
	return fmt.Sprintf("%s %v %s", ev.Type, tagStrings(ev, ignore), ev.Data)
}
