// Package query defines DCB queries: a list of items, OR-ed; an item matches an
// event when the event's type is one of the item's types (or the item names none)
// AND the event carries every tag of the item.
//
// Matching is item by item, with real OR: a query with the items
// {types: A, tags: x} and {types: B, tags: y} does not match an event of type A
// tagged only y.
package query

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errs"
	"github.com/pgdcb/pgdcb/tags"
)

// maxTypeLen is the longest event type, in bytes.
const maxTypeLen = 64

// InvalidQueryError says which item of a query is invalid and why. Error()
// cuts what it repeats of the input to a few hundred bytes; the fields hold
// it whole.
type InvalidQueryError struct {
	Item   int // index of the offending item, -1 for the query as a whole
	Reason string
}

func (e *InvalidQueryError) Error() string {
	if e.Item < 0 {
		return "pgdcb: invalid query: " + clip.Reason(e.Reason)
	}
	return fmt.Sprintf("pgdcb: invalid query: item %d: %s", e.Item, clip.Reason(e.Reason))
}

// Is makes errors.Is(err, ErrInvalidQuery) true.
func (e *InvalidQueryError) Is(target error) bool { return target == errs.ErrInvalidQuery }

// Item selects events by types (OR) and tags (AND). An item with neither matches
// every event.
type Item struct {
	Types []string
	Tags  tags.Set
}

// Query is a list of items, OR-ed. The zero Query matches nothing; All() matches
// every event.
type Query struct {
	items []Item
}

// New returns a query of the given items. Types are sorted and de-duplicated.
func New(items ...Item) Query {
	q := Query{items: make([]Item, len(items))}
	for i, it := range items {
		ts := slices.Clone(it.Types)
		slices.Sort(ts)
		q.items[i] = Item{Types: slices.Compact(ts), Tags: it.Tags}
	}
	return q
}

// All returns the query that matches every event.
func All() Query { return Query{items: []Item{{}}} }

// Tagged is a shortcut for a one-item query: events of any of the types (none
// means any type) that carry every given tag. Invalid tags panic; use New with
// tags.ParseSet to handle them as errors.
func Tagged(types []string, tagStrings ...string) Query {
	return New(Item{Types: types, Tags: tags.MustParseSet(tagStrings...)})
}

// Or returns a query matching what q or other matches.
func (q Query) Or(other Query) Query {
	return Query{items: append(slices.Clone(q.items), other.items...)}
}

// Items returns the query's items (a copy).
func (q Query) Items() []Item { return slices.Clone(q.items) }

// IsEmpty reports whether the query has no items (it matches nothing).
func (q Query) IsEmpty() bool { return len(q.items) == 0 }

// MatchesAll reports whether some item of q matches every event.
func (q Query) MatchesAll() bool {
	for _, it := range q.items {
		if len(it.Types) == 0 && it.Tags.Len() == 0 {
			return true
		}
	}
	return false
}

// Validate checks every item's types: non-empty, at most 64 bytes.
func (q Query) Validate() error {
	for i, it := range q.items {
		for _, t := range it.Types {
			if err := ValidateType(t); err != nil {
				return &InvalidQueryError{Item: i, Reason: err.Error()}
			}
		}
	}
	return nil
}

// ValidateType checks an event type: 1..64 bytes of valid UTF-8
// without NUL. It returns nil or an *InvalidTypeError.
func ValidateType(t string) error {
	var reason string
	switch {
	case t == "":
		reason = "empty"
	case len(t) > maxTypeLen:
		reason = fmt.Sprintf("longer than %d bytes", maxTypeLen)
	case !utf8.ValidString(t):
		reason = "not valid UTF-8"
	case strings.IndexByte(t, 0) >= 0:
		reason = "contains NUL"
	default:
		return nil
	}
	return &InvalidTypeError{Type: t, Reason: reason}
}

// InvalidTypeError says why an event type was refused. Error() quotes the
// type cut to a few hundred bytes; Type holds it whole.
type InvalidTypeError struct {
	Type   string
	Reason string // "empty", "longer than 64 bytes", "not valid UTF-8", "contains NUL"
}

func (e *InvalidTypeError) Error() string {
	if e.Type == "" {
		return "empty event type"
	}
	return "event type " + clip.Quote(e.Type) + " " + e.Reason
}

// matches reports whether an event of the given type and tags matches the item.
func (it Item) matches(eventType string, eventTags tags.Set) bool {
	if len(it.Types) > 0 && !slices.Contains(it.Types, eventType) {
		return false
	}
	return eventTags.ContainsAll(it.Tags)
}

// Matches reports whether an event of the given type and tags matches any item.
func (q Query) Matches(eventType string, eventTags tags.Set) bool {
	for _, it := range q.items {
		if it.matches(eventType, eventTags) {
			return true
		}
	}
	return false
}

// String renders the whole query, for logs and errors: for a large query it
// is large (errors of this library that repeat it cut it to a few hundred
// bytes).
func (q Query) String() string {
	if len(q.items) == 0 {
		return "none"
	}
	parts := make([]string, len(q.items))
	for i, it := range q.items {
		var b strings.Builder
		b.WriteString("{")
		if len(it.Types) > 0 {
			b.WriteString("types:" + strings.Join(it.Types, "|"))
		}
		if it.Tags.Len() > 0 {
			if len(it.Types) > 0 {
				b.WriteString(" ")
			}
			b.WriteString("tags:" + strings.Join(it.Tags.Strings(), "&"))
		}
		b.WriteString("}")
		parts[i] = b.String()
	}
	return strings.Join(parts, " OR ")
}
