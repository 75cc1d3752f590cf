package pgjson

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgcode"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// verdict is what Validate should say of a text, and what the server says.
type verdict int

const (
	accept     verdict = iota // both accept
	refuseBoth                // json.Valid refuses too
	refusePG                  // json.Valid accepts, jsonb refuses: what this package is for
	refuseOurs                // valid for jsonb, refused by our bound (MaxDepth)
)

type jsonCase struct {
	name string
	in   string
	want verdict
	// code is the SQLSTATE the server answers when it refuses ("" to not check).
	code string
}

func nested(open, mid, close string, n int) string {
	return strings.Repeat(open, n) + mid + strings.Repeat(close, n)
}

var cases = []jsonCase{
	{"empty object", `{}`, accept, ""},
	{"empty array", `[]`, accept, ""},
	{"null", `null`, accept, ""},
	{"true", `true`, accept, ""},
	{"false in space", " \t\r\nfalse\n", accept, ""},
	{"zero", `0`, accept, ""},
	{"negative zero", `-0`, accept, ""},
	{"float", `-12.5e+10`, accept, ""},
	{"object", `{"a":[1,{"b":null,"c":"d"}],"e":{}}`, accept, ""},
	{"utf-8", `"été ✓ 😀"`, accept, ""},
	{"escapes", `"\"\\\/\b\f\n\r\t\u0041\u00e9"`, accept, ""},
	{"surrogate pair", `"\ud83d\ude00"`, accept, ""},
	{"upper-case hex", `"\uD83D\uDE00"`, accept, ""},
	{"U+FFFF", `"\uffff"`, accept, ""},
	{"U+0001", `"\u0001"`, accept, ""},
	{"noncharacter raw", "\"\xef\xbf\xbe\"", accept, ""},
	{"duplicate keys", `{"a":1,"a":2}`, accept, ""},
	{"largest integer digits", "1" + strings.Repeat("0", MaxNumericIntegerDigits-1), accept, ""},
	{"1e131071", `1e131071`, accept, ""},
	{"9999e131068", `9999e131068`, accept, ""},
	{"1e-16383", `1e-16383`, accept, ""},
	{"largest scale as written", "0." + strings.Repeat("0", MaxNumericScale-1) + "1", accept, ""},
	{"0e-16383", `0e-16383`, accept, ""},
	{"zero with a huge exponent", `0e1073741822`, accept, ""},
	{"zero with a huge negative scale", `0.0e1073741822`, accept, ""},
	{"depth MaxDepth arrays", nested("[", "", "]", MaxDepth), accept, ""},
	{"depth MaxDepth objects", nested(`{"a":`, "1", "}", MaxDepth), accept, ""},
	{"depth MaxDepth mixed", nested(`[{"a":`, "1", "}]", MaxDepth/2), accept, ""},

	{"empty", ``, refuseBoth, pgcode.InvalidTextRepresentation},
	{"space", ` `, refuseBoth, pgcode.InvalidTextRepresentation},
	{"broken object", `{nope`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"trailing comma", `[1,]`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"trailing comma object", `{"a":1,}`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"leading zero", `01`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"dot end", `1.`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"dot start", `.5`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"plus", `+1`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"minus alone", `-`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"exponent alone", `1e`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"exponent sign alone", `1e+`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"bad escape", `"\x"`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"short unicode escape", `"\u12"`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"unterminated", `"abc`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"tru", `tru`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"truex", `truex`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"two values", `1 2`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"missing comma", `[1 2]`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"missing colon", `{"a" 1}`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"number key", `{1:2}`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"mismatched close", `[1}`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"extra close", `[1]]`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"raw tab in string", "\"a\tb\"", refuseBoth, pgcode.InvalidTextRepresentation},
	{"NaN", `NaN`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"Infinity", `-Infinity`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"BOM", "\xef\xbb\xbf{}", refuseBoth, pgcode.InvalidTextRepresentation},
	{"single quotes", `'a'`, refuseBoth, pgcode.InvalidTextRepresentation},
	{"NUL byte", "\"a\x00\"", refuseBoth, pgcode.CharacterNotInRepertoire},
	{"invalid UTF-8 outside a string", "[\xff]", refuseBoth, pgcode.CharacterNotInRepertoire},

	{"invalid UTF-8", "\"\xff\"", refusePG, pgcode.CharacterNotInRepertoire},
	{"truncated UTF-8", "\"\xc3\"", refusePG, pgcode.CharacterNotInRepertoire},
	{"UTF-8 surrogate", "\"\xed\xa0\x80\"", refusePG, pgcode.CharacterNotInRepertoire},
	{"overlong UTF-8", "\"\xc0\xaf\"", refusePG, pgcode.CharacterNotInRepertoire},
	{"above U+10FFFF", "\"\xf4\x90\x80\x80\"", refusePG, pgcode.CharacterNotInRepertoire},
	{"NUL escape", `"\u0000"`, refusePG, pgcode.UntranslatableCharacter},
	{"NUL escape in a key", `{"a\u0000":1}`, refusePG, pgcode.UntranslatableCharacter},
	{"lone high surrogate", `"\ud800"`, refusePG, pgcode.InvalidTextRepresentation},
	{"lone low surrogate", `"\udc00"`, refusePG, pgcode.InvalidTextRepresentation},
	{"two high surrogates", `"\ud800\ud800"`, refusePG, pgcode.InvalidTextRepresentation},
	{"low then high", `"\udc00\ud800"`, refusePG, pgcode.InvalidTextRepresentation},
	{"high then a letter", `"\ud800x"`, refusePG, pgcode.InvalidTextRepresentation},
	{"high then another escape", `"\ud800\n"`, refusePG, pgcode.InvalidTextRepresentation},
	{"high then a BMP escape", `"\ud800\u0041"`, refusePG, pgcode.InvalidTextRepresentation},
	{"1e999999", `1e999999`, refusePG, pgcode.NumericValueOutOfRange},
	{"1e131072", `1e131072`, refusePG, pgcode.NumericValueOutOfRange},
	{"12345e131068", `12345e131068`, refusePG, pgcode.NumericValueOutOfRange},
	{"too many integer digits", "1" + strings.Repeat("0", MaxNumericIntegerDigits), refusePG, pgcode.NumericValueOutOfRange},
	{"1e-20000", `1e-20000`, refusePG, pgcode.NumericValueOutOfRange},
	{"1e-16384", `1e-16384`, refusePG, pgcode.NumericValueOutOfRange},
	{"1.0e-16383", `1.0e-16383`, refusePG, pgcode.NumericValueOutOfRange},
	{"0e-16384", `0e-16384`, refusePG, pgcode.NumericValueOutOfRange},
	{"scale as written", "0." + strings.Repeat("0", MaxNumericScale) + "1", refusePG, pgcode.NumericValueOutOfRange},
	{"zero at INT_MAX/2", `0e1073741823`, refusePG, pgcode.NumericValueOutOfRange},
	{"zero at -INT_MAX/2", `0e-1073741823`, refusePG, pgcode.NumericValueOutOfRange},
	{"exponent past int64", `1e99999999999999999999999`, refusePG, pgcode.NumericValueOutOfRange},
	{"in an array", `[1,{"a":"\ud800"}]`, refusePG, pgcode.InvalidTextRepresentation},

	{"depth MaxDepth+1 arrays", nested("[", "", "]", MaxDepth+1), refuseOurs, ""},
	{"depth MaxDepth+1 objects", nested(`{"a":`, "1", "}", MaxDepth+1), refuseOurs, ""},
	// Past the server's own limit with default settings: both refuse.
	{"depth 9000", nested("[", "", "]", 9000), refuseOurs, ""},
	{"depth 20000", nested("[", "", "]", 20000), refuseOurs, pgcode.StatementTooComplex},
}

func TestValidateTable(t *testing.T) {
	t.Parallel()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate([]byte(c.in))
			require.Equal(t, c.want == accept, err == nil, "%s: %v", c.name, err)
			if c.want != refuseOurs { // json.Valid refuses nesting past 10000
				require.Equal(t, c.want != refuseBoth, json.Valid([]byte(c.in)), "%s: json.Valid", c.name)
			}
			require.Equal(t, err == nil, ValidateString(c.in) == nil, c.name)
			require.Equal(t, err == nil, Valid([]byte(c.in)), c.name)
			var e *Error
			if err != nil {
				require.ErrorAs(t, err, &e)
				require.Equal(t, c.want == refuseOurs, e.Limit, "%s: %v", c.name, err)
			}
		})
	}
}

// Every case against the real server: what Validate accepts, jsonb accepts;
// what it refuses (other than for MaxDepth), jsonb refuses.
func TestValidateAgreesWithServer(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate([]byte(c.in))
			code, perr := serverVerdict(t, pool, []byte(c.in))
			require.NoError(t, perr, c.name)
			switch {
			case err == nil:
				require.Empty(t, code, "%s: Validate accepts, the server refuses", c.name)
			case c.want == refuseOurs && c.code == "":
				require.Empty(t, code, "%s: the depth bound is ours: the server accepts", c.name)
			default:
				require.NotEmpty(t, code, "%s: Validate refuses (%v), the server accepts", c.name, err)
			}
			if c.code != "" {
				require.Equal(t, c.code, code, c.name)
			}
		})
	}
}

// serverVerdict returns "" when `SELECT $1::text::jsonb` accepts b, the
// SQLSTATE when the server refuses it, or an error for anything else.
func serverVerdict(t testing.TB, pool *pgxpool.Pool, b []byte) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var n int
	err := pool.QueryRow(ctx, "SELECT octet_length($1::text::jsonb::text)", string(b)).Scan(&n)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &pgErr):
		return pgErr.Code, nil
	}
	return "", err
}

// FuzzValidate compares Validate with json.Valid (Validate accepts only what
// it accepts) and with the server (jsonb accepts what Validate accepts and
// refuses what it refuses, except for MaxDepth). The seeds are the table's
// cases; `go test -fuzz FuzzValidate ./internal/pgjson/` explores further,
// one server round trip per input.
func FuzzValidate(f *testing.F) {
	for _, c := range cases {
		if len(c.in) < 4096 {
			f.Add([]byte(c.in))
		}
	}
	pool := pgtest.Pool(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Validate(b)
		if err == nil {
			require.True(t, json.Valid(b), "Validate accepts what json.Valid refuses: %q", b)
		}
		var e *Error
		if err != nil {
			require.ErrorAs(t, err, &e)
			require.True(t, e.Offset >= 0 && e.Offset <= len(b), "offset %d out of %d bytes", e.Offset, len(b))
			if e.Limit {
				return // our bound: the server may accept it
			}
		}
		code, perr := serverVerdict(t, pool, b)
		require.NoError(t, perr)
		if err == nil {
			require.Empty(t, code, "Validate accepts %q, the server refuses it (%s)", b, code)
		} else {
			require.NotEmpty(t, code, "Validate refuses %q (%v), the server accepts it", b, err)
		}
	})
}

func TestValidateDoesNotAllocate(t *testing.T) {
	doc := []byte(`{"a":[1,2.5e3,{"b":"été \ud83d\ude00","c":null}],"d":true,"e":"` + strings.Repeat("x", 1000) + `"}`)
	deep := []byte(nested("[", "", "]", MaxDepth))
	allocs := testing.AllocsPerRun(100, func() {
		if Validate(doc) != nil || Validate(deep) != nil {
			t.Fatal("refused")
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkValidate(b *testing.B) {
	doc := []byte(`{"id":"0d9e8f6a-8e8b-4c4e-9c1e-0e6b1f2d3c4b","amount":1250.75,"currency":"EUR",` +
		`"tags":["a","b","c"],"note":"paiement reçu ✓","nested":{"x":[1,2,3],"y":null,"z":false}}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	b.Run("pgjson.Validate", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			_ = Validate(doc)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			_ = json.Valid(doc)
		}
	})
}
