package tags_test

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/tags"
)

// Whatever Parse accepts is a tag within the documented alphabet and limits
// that prints as its input and parses to itself; whatever it refuses, it
// refuses with an error matching pgdcb.ErrInvalidTag.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"course=c1", "k=v=w", "=v", "k=", "K=v", "k", "", "a.b_c-9=x y",
		"k=\x00", "k=\xff", strings.Repeat("k", 64) + "=v", strings.Repeat("k", 65) + "=v",
		"k=" + strings.Repeat("é", 128), "k=" + strings.Repeat("v", 257), "a=b", "=", "k==", "a.b-c_d=é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := tags.Parse(s)
		if err != nil {
			if !errors.Is(err, pgdcb.ErrInvalidTag) {
				t.Fatalf("Parse(%q): untyped error %v", s, err)
			}
			if !tag.IsZero() {
				t.Fatalf("Parse(%q) failed but returned %q", s, tag)
			}
			return
		}
		key, value := tag.Key(), tag.Value()
		if tag.String() != s || key+"="+value != s {
			t.Fatalf("Parse(%q) = %q (key %q, value %q)", s, tag, key, value)
		}
		if key == "" || len(key) > tags.MaxKeyLen || value == "" || len(value) > tags.MaxValueLen ||
			!utf8.ValidString(value) || strings.IndexByte(value, 0) >= 0 || strings.Contains(key, "=") {
			t.Fatalf("Parse(%q) accepted key %q value %q", s, key, value)
		}
		for _, c := range []byte(key) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
				t.Fatalf("Parse(%q) accepted key byte %q", s, c)
			}
		}
		again, err := tags.New(key, value)
		if err != nil || again != tag {
			t.Fatalf("New(%q, %q) = %q, %v; Parse gave %q", key, value, again, err, tag)
		}
		set, err := tags.ParseSet(s, s)
		if err != nil || set.Len() != 1 || !set.Has(tag) {
			t.Fatalf("ParseSet(%q twice) = %v, %v", s, set.Strings(), err)
		}
	})
}
