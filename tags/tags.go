// Package tags defines the Tag type of pgdcb events: a `key=value` string with a
// restricted key alphabet, and canonical (sorted, de-duplicated) tag sets.
//
// Key: lower-case `[a-z0-9_.-]`, 1..64 bytes. Value: 1..256 bytes of valid UTF-8
// without NUL. The first `=` separates key and value; a value may contain `=`.
package tags

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errs"
)

// Limits of a tag's parts, in bytes (the package doc states them).
const (
	maxKeyLen   = 64
	maxValueLen = 256
)

// InvalidTagError names the offending tag and why it was refused. Error()
// quotes the tag cut to a few hundred bytes (with its length); Tag holds it
// whole.
type InvalidTagError struct {
	Tag    string // the tag as given
	Reason string
}

func (e *InvalidTagError) Error() string {
	return "pgdcb: invalid tag " + clip.Quote(e.Tag) + ": " + clip.Reason(e.Reason)
}

// Is makes errors.Is(err, ErrInvalidTag) true.
func (e *InvalidTagError) Is(target error) bool { return target == errs.ErrInvalidTag }

// Tag is a validated `key=value` string. The zero Tag is invalid; build tags with
// New or Parse.
type Tag struct{ s string }

// New builds a tag from a key and a value, validating both.
func New(key, value string) (Tag, error) {
	s := key + "=" + value
	if err := validate(s, key, value); err != nil {
		return Tag{}, err
	}
	return Tag{s: s}, nil
}

// Must is New that panics on invalid input; for constants in code and tests.
func Must(key, value string) Tag {
	t, err := New(key, value)
	if err != nil {
		panic(err)
	}
	return t
}

// Parse reads a `key=value` string.
func Parse(s string) (Tag, error) {
	key, value, ok := strings.Cut(s, "=")
	if !ok {
		return Tag{}, &InvalidTagError{Tag: s, Reason: "missing '=' between key and value"}
	}
	if err := validate(s, key, value); err != nil {
		return Tag{}, err
	}
	return Tag{s: s}, nil
}

// MustParse is Parse that panics on invalid input.
func MustParse(s string) Tag {
	t, err := Parse(s)
	if err != nil {
		panic(err)
	}
	return t
}

func validate(s, key, value string) error {
	switch {
	case key == "":
		return &InvalidTagError{Tag: s, Reason: "empty key"}
	case len(key) > maxKeyLen:
		return &InvalidTagError{Tag: s, Reason: fmt.Sprintf("key longer than %d bytes", maxKeyLen)}
	case value == "":
		return &InvalidTagError{Tag: s, Reason: "empty value"}
	case len(value) > maxValueLen:
		return &InvalidTagError{Tag: s, Reason: fmt.Sprintf("value longer than %d bytes", maxValueLen)}
	case !utf8.ValidString(value):
		return &InvalidTagError{Tag: s, Reason: "value is not valid UTF-8"}
	case strings.IndexByte(value, 0) >= 0:
		return &InvalidTagError{Tag: s, Reason: "value contains NUL"}
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return &InvalidTagError{Tag: s, Reason: fmt.Sprintf("key has %q; keys use only [a-z0-9_.-]", c)}
		}
	}
	return nil
}

// String returns `key=value`.
func (t Tag) String() string { return t.s }

// Key returns the part before the first '='.
func (t Tag) Key() string { k, _, _ := strings.Cut(t.s, "="); return k }

// Value returns the part after the first '='.
func (t Tag) Value() string { _, v, _ := strings.Cut(t.s, "="); return v }

// IsZero reports whether t is the zero (invalid) Tag.
func (t Tag) IsZero() bool { return t.s == "" }

// Set is a canonical tag set: sorted by string, no duplicates. Build it with NewSet
// or ParseSet; the zero Set is the empty set.
type Set struct{ tags []Tag }

// NewSet returns the canonical set of the given tags: exact duplicates are
// removed; a zero Tag, or two tags with the same key and different values, are
// refused (one key names one value of an event).
func NewSet(ts ...Tag) (Set, error) {
	for _, t := range ts {
		if t.IsZero() {
			return Set{}, &InvalidTagError{Tag: "", Reason: "zero Tag (build tags with tags.New or tags.Parse)"}
		}
	}
	c := slices.Clone(ts)
	slices.SortFunc(c, func(a, b Tag) int { return strings.Compare(a.s, b.s) })
	c = slices.Compact(c)
	for i := 1; i < len(c); i++ {
		if c[i-1].Key() == c[i].Key() {
			return Set{}, &InvalidTagError{Tag: c[i].s, Reason: fmt.Sprintf("duplicate key %q (also in %s)", c[i].Key(), clip.Quote(c[i-1].s))}
		}
	}
	return Set{tags: c}, nil
}

// ParseSet parses each string as a tag and returns their canonical set. The error
// names the first invalid tag.
func ParseSet(ss ...string) (Set, error) {
	ts := make([]Tag, 0, len(ss))
	for _, s := range ss {
		t, err := Parse(s)
		if err != nil {
			return Set{}, err
		}
		ts = append(ts, t)
	}
	return NewSet(ts...)
}

// MustParseSet is ParseSet that panics on invalid input.
func MustParseSet(ss ...string) Set {
	s, err := ParseSet(ss...)
	if err != nil {
		panic(err)
	}
	return s
}

// Len is the number of distinct tags.
func (s Set) Len() int { return len(s.tags) }

// Tags returns the tags in canonical order (a copy).
func (s Set) Tags() []Tag { return slices.Clone(s.tags) }

// Strings returns the tags as `key=value` strings in canonical order.
func (s Set) Strings() []string {
	out := make([]string, len(s.tags))
	for i, t := range s.tags {
		out[i] = t.s
	}
	return out
}

// Size is the sum of the tags' lengths in bytes (each `key=value`).
func (s Set) Size() int {
	n := 0
	for _, t := range s.tags {
		n += len(t.s)
	}
	return n
}

// Has reports whether t is in the set.
func (s Set) Has(t Tag) bool {
	_, ok := slices.BinarySearchFunc(s.tags, t, func(a, b Tag) int { return strings.Compare(a.s, b.s) })
	return ok
}

// ContainsAll reports whether every tag of sub is in s.
func (s Set) ContainsAll(sub Set) bool {
	for _, t := range sub.tags {
		if !s.Has(t) {
			return false
		}
	}
	return true
}

// Get returns the value of the first tag with the given key, in canonical order.
func (s Set) Get(key string) (string, bool) {
	for _, t := range s.tags {
		if t.Key() == key {
			return t.Value(), true
		}
	}
	return "", false
}
