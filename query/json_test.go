package query_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

func TestJSON(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		q    query.Query
		json string
	}{
		{"none", query.Query{}, `[]`},
		{"all", query.All(), `[{}]`},
		{"types sorted", query.Tagged([]string{"B", "A", "B"}), `[{"types":["A","B"]}]`},
		{"two items", query.Tagged([]string{"A"}, "y=2", "x=1").Or(query.Tagged(nil, "z=3")),
			`[{"types":["A"],"tags":["x=1","y=2"]},{"tags":["z=3"]}]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := json.Marshal(c.q)
			require.NoError(t, err)
			require.JSONEq(t, c.json, string(b))
			var back query.Query
			require.NoError(t, json.Unmarshal(b, &back))
			require.Equal(t, c.q.String(), back.String())
			require.Equal(t, c.q.IsEmpty(), back.IsEmpty())
		})
	}
}

func TestJSONRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, json string
		want       error
	}{
		{"object", `{"types":["A"]}`, pgdcb.ErrInvalidQuery},
		{"unknown field", `[{"type":["A"]}]`, pgdcb.ErrInvalidQuery},
		{"null item", `[null]`, pgdcb.ErrInvalidQuery},
		{"empty type", `[{"types":[""]}]`, pgdcb.ErrInvalidQuery},
		{"NUL in a type", `[{"types":["a\u0000"]}]`, pgdcb.ErrInvalidQuery},
		{"bad tag", `[{"tags":["nokey"]}]`, pgdcb.ErrInvalidTag},
		{"one key twice", `[{"tags":["k=1","k=2"]}]`, pgdcb.ErrInvalidTag},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := query.Tagged(nil, "keep=1")
			err := json.Unmarshal([]byte(c.json), &q)
			require.ErrorIs(t, err, c.want)
			require.Equal(t, "{tags:keep=1}", q.String(), "left unchanged")
		})
	}
	q := query.Tagged(nil, "keep=1")
	require.ErrorIs(t, q.UnmarshalJSON([]byte(`[] []`)), pgdcb.ErrInvalidQuery, "data after the array")
	require.NoError(t, json.Unmarshal([]byte(`null`), &q))
	require.Equal(t, "{tags:keep=1}", q.String(), "null leaves it unchanged")
}

func ExampleQuery_MarshalJSON() {
	q := query.Tagged([]string{"StudentSubscribed"}, "course=c1").Or(query.Tagged(nil, "student=s7"))
	b, _ := json.Marshal(q)
	fmt.Println(string(b))
	var back query.Query
	_ = json.Unmarshal(b, &back)
	fmt.Println(back)
	// Output:
	// [{"types":["StudentSubscribed"],"tags":["course=c1"]},{"tags":["student=s7"]}]
	// {types:StudentSubscribed tags:course=c1} OR {tags:student=s7}
}
