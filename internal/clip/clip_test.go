package clip

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestQuote(t *testing.T) {
	t.Parallel()
	require.Equal(t, `"abc"`, Quote("abc"))
	short := strings.Repeat("é", 90) // 180 bytes, 182 quoted
	require.Equal(t, strconv.Quote(short), Quote(short))

	long := strings.Repeat("é", 1<<19) // 1 MiB
	q := Quote(long)
	require.LessOrEqual(t, len(q), Max+32)
	require.True(t, utf8.ValidString(q), "cut between runes")
	require.True(t, strings.HasSuffix(q, `…" (1048576 bytes)`), q)

	bin := strings.Repeat("\xff", 1000)
	q = Quote(bin)
	require.LessOrEqual(t, len(q), Max+32)
	require.Contains(t, q, `\xff`)
	require.Contains(t, q, "(1000 bytes)")
}

func TestString(t *testing.T) {
	t.Parallel()
	require.Equal(t, "abc", String("abc"))
	s := strings.Repeat("x", Max-1) + "€€"
	c := String(s)
	require.True(t, utf8.ValidString(c))
	require.Equal(t, strings.Repeat("x", Max-1)+"… ("+strconv.Itoa(len(s))+" bytes)", c)
}

func TestReason(t *testing.T) {
	t.Parallel()
	r := "event type " + Quote(strings.Repeat("é", 1000)) + " longer than 64 bytes"
	require.Equal(t, r, Reason(r), "a reason embedding one quoted value is not cut again")
	long := strings.Repeat("r", 10000)
	require.Equal(t, long[:MaxReason]+"… (10000 bytes)", Reason(long))
}
