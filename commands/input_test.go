package commands_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
)

// Command data that Go's JSON accepts but jsonb refuses is refused before
// anything is sent; negative Config values are refused; errors repeating
// input stay short.
func TestCommandInputIsCheckedLikeEvents(t *testing.T) {
	t.Parallel()
	ex, s := newExecutor(t, nil)
	for _, tc := range []struct{ name, data string }{
		{"NUL", `{"a":"\u0000"}`},
		{"number out of range", `{"n":1e999999}`},
		{"lone surrogate", `"\ud800"`},
		{"invalid UTF-8", "\"\xff\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cmd("Inc", increment("in", 10))
			c.Data = json.RawMessage(tc.data)
			_, err := ex.Execute(context.Background(), c)
			require.ErrorIs(t, err, commands.ErrInvalidCommand, "data %q", tc.data)
			require.Contains(t, err.Error(), "data")
		})
	}
	require.Zero(t, countEvents(t, s, counterQuery("in")))

	long := strings.Repeat("x", 1<<20)
	_, err := ex.Execute(context.Background(), commands.Command{Type: long, Handler: increment("in", 10)})
	require.ErrorIs(t, err, commands.ErrInvalidCommand)
	require.Less(t, len(err.Error()), 1024)

	_, err = commands.New(s, &commands.Config{MaxAttempts: -1})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.ErrorContains(t, err, "MaxAttempts")
}
