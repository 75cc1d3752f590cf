// Package clip bounds what error messages repeat from their input: a value is
// quoted and cut at a rune boundary, with "…" and its total length, so that a
// 1 MB tag or a 10,000-item query gives an error of a few hundred bytes.
// Errors keep the full values in their fields; only their messages are cut.
package clip

import (
	"strconv"
	"unicode/utf8"
)

// Max is the most bytes of the quoted value a message repeats (the quotes,
// the "…" and the length note come on top).
const Max = 200

// Quote returns s quoted as by strconv.Quote when that takes at most Max
// bytes; otherwise the quoted longest prefix of s (cut between runes) that
// fits, followed by "…" and s's length in bytes: "abc…" (1048576 bytes).
func Quote(s string) string {
	if len(s) <= Max/4-2 { // even all-escaped it fits
		return strconv.Quote(s)
	}
	q := strconv.Quote(s)
	if len(q) <= Max {
		return q
	}
	buf := make([]byte, 0, Max+32)
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		piece := strconv.Quote(s[i : i+size])
		piece = piece[1 : len(piece)-1]
		if len(buf)+len(piece) > Max-1 {
			break
		}
		buf = append(buf, piece...)
		i += size
	}
	buf = append(buf, "…\" ("...)
	buf = strconv.AppendInt(buf, int64(len(s)), 10)
	buf = append(buf, " bytes)"...)
	return string(buf)
}

// MaxReason is the most bytes of a reason a message repeats: a reason is
// text of the library's that may embed one value cut by Quote.
const MaxReason = 2*Max + 100

// String returns s when it has at most Max bytes, else its longest prefix of
// at most Max bytes that ends between runes, followed by "…" and s's length:
// for a rendering of the input that needs no quoting (a query, a cursor).
func String(s string) string { return cut(s, Max) }

// Reason is String for a reason, with the bound MaxReason.
func Reason(s string) string { return cut(s, MaxReason) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	c := n
	for c > 0 && !utf8.RuneStart(s[c]) {
		c--
	}
	return s[:c] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}
