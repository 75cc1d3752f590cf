package query_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

func TestItemsAreORedNotFlattened(t *testing.T) {
	t.Parallel()
	q := query.New(
		query.Item{Types: []string{"A"}, Tags: tags.MustParseSet("x=1")},
		query.Item{Types: []string{"B"}, Tags: tags.MustParseSet("y=1")},
	)
	require.True(t, q.Matches("A", tags.MustParseSet("x=1")))
	require.True(t, q.Matches("B", tags.MustParseSet("y=1", "z=1")))
	// A flattened (types A|B, tags x&y) query would match neither of these.
	require.False(t, q.Matches("A", tags.MustParseSet("y=1")))
	require.False(t, q.Matches("B", tags.MustParseSet("x=1")))
	require.False(t, q.Matches("C", tags.MustParseSet("x=1", "y=1")))
}

func TestTypesORTagsAND(t *testing.T) {
	t.Parallel()
	q := query.Tagged([]string{"A", "B"}, "x=1", "y=2")
	require.True(t, q.Matches("B", tags.MustParseSet("x=1", "y=2")))
	require.False(t, q.Matches("B", tags.MustParseSet("x=1")))
	require.True(t, query.Tagged(nil, "x=1").Matches("Anything", tags.MustParseSet("x=1")))
}

func TestAllAndEmpty(t *testing.T) {
	t.Parallel()
	require.True(t, query.All().Matches("A", tags.Set{}))
	require.True(t, query.All().MatchesAll())
	require.False(t, query.Query{}.Matches("A", tags.Set{}))
	require.True(t, query.Query{}.IsEmpty())
	require.Equal(t, "none", query.Query{}.String())
}

func TestValidateNamesItem(t *testing.T) {
	t.Parallel()
	q := query.New(query.Item{Types: []string{"ok"}}, query.Item{Types: []string{strings.Repeat("t", 65)}})
	err := q.Validate()
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Contains(t, err.Error(), "item 1")
	require.ErrorIs(t, query.New(query.Item{Types: []string{""}}).Validate(), pgdcb.ErrInvalidQuery)
}

// Types are 1..64 bytes of UTF-8 without NUL; errors quote at most a few
// hundred bytes of them.
func TestValidateType(t *testing.T) {
	t.Parallel()
	require.NoError(t, query.ValidateType("Opened"))
	for _, bad := range []string{"", strings.Repeat("t", 65), "Bad\xff", "Bad\x00"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			err := query.ValidateType(bad)
			var te *query.InvalidTypeError
			require.ErrorAs(t, err, &te, bad)
			require.Equal(t, bad, te.Type)
			require.ErrorIs(t, query.New(query.Item{Types: []string{bad}}).Validate(), pgdcb.ErrInvalidQuery)
		})
	}
	require.EqualError(t, query.ValidateType("Bad\xff"), `event type "Bad\xff" not valid UTF-8`)
	long := strings.Repeat("é", 1<<19)
	err := query.New(query.Item{Types: []string{long}}).Validate()
	require.ErrorIs(t, err, pgdcb.ErrInvalidQuery)
	require.Less(t, len(err.Error()), 1024)
	require.Contains(t, err.Error(), "(1048576 bytes)")
}
