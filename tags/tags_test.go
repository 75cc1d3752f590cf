package tags_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/tags"
)

func TestParseValid(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"a=b", "student_id=42", "k.e-y_0=v=with=equals", "x=" + strings.Repeat("é", 128), strings.Repeat("k", 64) + "=v"} {
		t.Run(s, func(t *testing.T) {
			tg, err := tags.Parse(s)
			require.NoError(t, err, s)
			require.Equal(t, s, tg.String())
			k, v, _ := strings.Cut(s, "=")
			require.Equal(t, k, tg.Key())
			require.Equal(t, v, tg.Value())
		})
	}
}

func TestParseInvalidNamesTheTag(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"novalue":                       "missing '='",
		"=v":                            "empty key",
		"k=":                            "empty value",
		"Key=v":                         "keys use only",
		"k y=v":                         "keys use only",
		strings.Repeat("k", 65) + "=v":  "key longer",
		"k=" + strings.Repeat("v", 257): "value longer",
		"k=a\x00b":                      "NUL",
		"k=\xff":                        "UTF-8",
	}
	for in, reason := range cases {
		t.Run(fmt.Sprintf("%s %.24q", reason, in), func(t *testing.T) {
			_, err := tags.Parse(in)
			require.Error(t, err, in)
			require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
			var te *tags.InvalidTagError
			require.True(t, errors.As(err, &te))
			require.Equal(t, in, te.Tag)
			require.Contains(t, err.Error(), reason, in)
		})
	}
}

func TestSetCanonical(t *testing.T) {
	t.Parallel()
	s, err := tags.ParseSet("b=2", "a=1", "b=2")
	require.NoError(t, err)
	require.Equal(t, []string{"a=1", "b=2"}, s.Strings())
	require.True(t, s.Has(tags.MustParse("a=1")))
	require.False(t, s.Has(tags.MustParse("a=2")))
	require.True(t, s.ContainsAll(tags.MustParseSet("b=2")))
	require.False(t, s.ContainsAll(tags.MustParseSet("b=2", "c=3")))
	v, ok := s.Get("b")
	require.True(t, ok)
	require.Equal(t, "2", v)
}

func TestSetDuplicateKeyRefused(t *testing.T) {
	t.Parallel()
	_, err := tags.ParseSet("student=1", "course=x", "student=2")
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
	require.Contains(t, err.Error(), `duplicate key "student"`)
	_, err = tags.NewSet(tags.Tag{})
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
}

// A 1 MB tag gives a message under 1 KB; the field keeps the tag whole.
func TestErrorMessageIsBounded(t *testing.T) {
	t.Parallel()
	long := "k=" + strings.Repeat("v", 1<<20)
	_, err := tags.Parse(long)
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
	require.Less(t, len(err.Error()), 1024)
	require.Contains(t, err.Error(), "(1048578 bytes)")
	var te *tags.InvalidTagError
	require.ErrorAs(t, err, &te)
	require.Equal(t, long, te.Tag)
	_, err = tags.ParseSet("k=1", "k="+strings.Repeat("é", 100))
	require.ErrorIs(t, err, pgdcb.ErrInvalidTag)
	require.Less(t, len(err.Error()), 1024)
	require.Equal(t, 3+2+200, tags.MustParseSet("a=1", "b="+strings.Repeat("é", 100)).Size())
}
