package pgjson

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// normalizeCases are texts whose jsonb form differs from the input in each
// way jsonb normalises.
var normalizeCases = []string{
	`{"x":1e2}`, `{"x":1E+2}`, `{"x":1.50}`, `{"x":-0}`, `{"x":-0.0}`, `{"x":0e5}`, `{"x":0.0e-3}`,
	`{"x":1.0e-3}`, `{"x":1000e-3}`, `{"x":0.001e3}`, `{"x":1.55e1}`, `[1e-20, -12.5E+3, 123456789012345678901234567890]`,
	`{"b":1,"a":2}`, `{"bb":1,"a":2,"c":3}`, `{"a":1,"a":2}`, `{"a":{"z":1,"y":[3,{"k":"v","j":null}]},"a":true}`,
	` { "a" : [ 1 , 2 ] , "b" : { } , "c" : [ ] } `, `[]`, `{}`, `"top"`, `12`, `true`, `null`,
	`"\u00e9\u0041\n\t\/\"\\\u001f\u007f\ud83d\ude00"`, `{"é":1,"e":2,"ee":3}`, `"tab	raw"`,
	`{"":1,"\u0000x":2}`,
}

// Normalize gives, byte for byte, what PostgreSQL gives back from jsonb: for
// the table's cases and every case Validate accepts.
func TestNormalizeAgreesWithServer(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	ins := append([]string{}, normalizeCases...)
	for _, c := range cases {
		if c.want == accept && len(c.in) < 1<<16 {
			ins = append(ins, c.in)
		}
	}
	for _, in := range ins {
		got, err := Normalize([]byte(in))
		if Validate([]byte(in)) != nil {
			require.Error(t, err, "%q", in)
			continue
		}
		require.NoError(t, err, "%q", in)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		var want string
		err = pool.QueryRow(ctx, "SELECT $1::text::jsonb::text", in).Scan(&want)
		cancel()
		require.NoError(t, err, "%q", in)
		require.Equal(t, want, string(got), "%.200q", in)
		again, err := Normalize(got)
		require.NoError(t, err)
		require.Equal(t, got, again, "normal forms are fixed points")
	}
	_, err := Normalize([]byte(`{"a":`))
	require.Error(t, err)
	require.True(t, strings.HasPrefix(string(must(Normalize([]byte(`{"x":1e2}`)))), `{"x": 100}`))
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
