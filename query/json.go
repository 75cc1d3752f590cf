package query

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/pgdcb/pgdcb/tags"
)

// jsonItem is the JSON form of an Item.
type jsonItem struct {
	Types []string `json:"types,omitempty"`
	Tags  []string `json:"tags,omitempty"`
}

// MarshalJSON implements json.Marshaler. A query is a JSON array of its
// items, each an object with its "types" and its "tags" (`key=value`
// strings), either left out when empty:
//
//	[{"types":["CourseDefined"],"tags":["course=c1"]},{"tags":["student=s1"]}]
//
// The zero query (matching nothing) is [], All() is [{}].
func (q Query) MarshalJSON() ([]byte, error) {
	items := make([]jsonItem, len(q.items))
	for i, it := range q.items {
		items[i] = jsonItem{Types: it.Types, Tags: it.Tags.Strings()}
	}
	return json.Marshal(items)
}

// UnmarshalJSON implements json.Unmarshaler, reading MarshalJSON's form
// (null leaves q unchanged). Unknown fields and null items are refused; the query is built
// with New (types sorted, de-duplicated) and validated: invalid input gives
// an error matching pgdcb.ErrInvalidQuery or pgdcb.ErrInvalidTag, and
// leaves q unchanged.
func (q *Query) UnmarshalJSON(b []byte) error {
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var raw []*jsonItem
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&raw)
	if err == nil {
		if _, end := dec.Token(); !errors.Is(end, io.EOF) {
			err = errors.New("data after the array")
		}
	}
	if err != nil {
		return &InvalidQueryError{Item: -1, Reason: fmt.Sprintf("not a JSON array of {types, tags} objects: %v", err)}
	}
	items := make([]Item, len(raw))
	for i, r := range raw {
		if r == nil {
			return &InvalidQueryError{Item: i, Reason: "null (an item is an object; {} matches every event)"}
		}
		ts, err := tags.ParseSet(r.Tags...)
		if err != nil {
			return fmt.Errorf("pgdcb: invalid query: item %d: %w", i, err)
		}
		items[i] = Item{Types: r.Types, Tags: ts}
	}
	out := New(items...)
	if err := out.Validate(); err != nil {
		return err
	}
	*q = out
	return nil
}
