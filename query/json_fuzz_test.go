package query_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

// Whatever JSON UnmarshalJSON accepts, MarshalJSON gives back a form that
// decodes to the same query and encodes to itself; whatever it refuses, it
// refuses with a typed error and leaves the query unchanged.
func FuzzQueryJSON(f *testing.F) {
	for _, s := range []string{
		`[]`, `[{}]`, `null`, `[{"types":["A","B"],"tags":["x=1","y=2"]},{"tags":["z=3"]}]`,
		`[{"types":["B","A","A"]}]`, `[{"tags":["k=v=w"]}]`, `[{"tags":["k=1","k=1"]}]`,
		`[{"types":[""]}]`, `[{"tags":["K=1"]}]`, `[null]`, `{"types":[]}`, `[{"type":[]}]`,
		`[{"types":["\u00e9"]}]`, `[{"types":["a\u0000"]}]`, `[] x`, `[{"tags":["a=\ud800"]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q := query.Tagged(nil, "fuzz=sentinel")
		before := q.String()
		if err := json.Unmarshal(b, &q); err != nil {
			var syntax *json.SyntaxError
			if !errors.Is(err, pgdcb.ErrInvalidQuery) && !errors.Is(err, pgdcb.ErrInvalidTag) && !errors.As(err, &syntax) {
				t.Fatalf("untyped error for %q: %v", b, err)
			}
			if q.String() != before {
				t.Fatalf("refused input %q changed the query to %s", b, q)
			}
			return
		}
		if err := q.Validate(); err != nil {
			t.Fatalf("accepted %q as an invalid query: %v", b, err)
		}
		m, err := json.Marshal(q)
		if err != nil {
			t.Fatalf("marshal %s: %v", q, err)
		}
		var back query.Query
		if err := json.Unmarshal(m, &back); err != nil {
			t.Fatalf("its own form %s refused: %v", m, err)
		}
		if back.String() != q.String() || len(back.Items()) != len(q.Items()) {
			t.Fatalf("round trip of %q: %s became %s", b, q, back)
		}
		m2, err := json.Marshal(back)
		if err != nil || string(m2) != string(m) {
			t.Fatalf("not stable: %s then %s (%v)", m, m2, err)
		}
	})
}
