// Package appendif defines the condition of a conditional append (AppendIf) and
// the errors that report why one did not commit.
//
// It lives in the directory append/ (import "github.com/pgdcb/pgdcb/append")
// but its package clause is appendif: a package named append would shadow
// Go's builtin append in every file that imports it. Import it with the
// explicit name, as the rest of this module does:
//
//	import appendif "github.com/pgdcb/pgdcb/append"
package appendif

import (
	"fmt"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errs"
	"github.com/pgdcb/pgdcb/query"
)

// Condition is what an AppendIf depends on.
//
// The append fails with ErrConditionFailed if an event matching FailIfEventsMatch
// exists that the decision did not see: with After set, one that After has not
// seen (see cursor.Cursor.Seen); without After, any matching event at all.
//
// Idempotency, when not empty, is checked first against the whole log (After does
// not limit it): a match fails the append with ErrIdempotent, so a retry of an
// append that already committed is recognised as such rather than as a conflict.
type Condition struct {
	FailIfEventsMatch query.Query
	After             *cursor.Cursor
	Idempotency       query.Query
}

// FailIf returns the condition "no event matching q that the decision at after
// did not see". A nil after means "no matching event at all".
func FailIf(q query.Query, after *cursor.Cursor) Condition {
	return Condition{FailIfEventsMatch: q, After: after}
}

// WithIdempotency returns c with the given idempotency query.
func (c Condition) WithIdempotency(q query.Query) Condition {
	c.Idempotency = q
	return c
}

// Validate checks that the condition has something to check and that its queries
// are valid.
func (c Condition) Validate() error {
	if c.FailIfEventsMatch.IsEmpty() && c.Idempotency.IsEmpty() {
		return &query.InvalidQueryError{Item: -1, Reason: "condition has neither FailIfEventsMatch nor Idempotency items (use Append for unconditional appends)"}
	}
	if c.After != nil && c.FailIfEventsMatch.IsEmpty() {
		return &query.InvalidQueryError{Item: -1, Reason: "condition has After but an empty FailIfEventsMatch query"}
	}
	if err := c.FailIfEventsMatch.Validate(); err != nil {
		return fmt.Errorf("condition FailIfEventsMatch: %w", err)
	}
	if err := c.Idempotency.Validate(); err != nil {
		return fmt.Errorf("condition Idempotency: %w", err)
	}
	return nil
}

// ConditionFailedError reports a failed FailIfEventsMatch check. Error()
// cuts the query and the cursor it repeats to a few hundred bytes each; the
// fields hold them whole.
type ConditionFailedError struct {
	// Query is the FailIfEventsMatch query that matched.
	Query query.Query
	// After is the cursor the check ran against (nil: the whole log).
	After *cursor.Cursor
	// ConflictPosition is the position of one event the decision did not see.
	ConflictPosition int64
}

func (e *ConditionFailedError) Error() string {
	after := "the start of the log"
	if e.After != nil {
		after = "cursor " + clip.String(e.After.String())
	}
	return fmt.Sprintf("pgdcb: append condition failed: event at position %d matches %s and was not seen by %s",
		e.ConflictPosition, clip.String(e.Query.String()), after)
}

// Is makes errors.Is(err, errs.ErrConditionFailed) true.
func (e *ConditionFailedError) Is(target error) bool { return target == errs.ErrConditionFailed }

// IdempotentError reports that the operation was already applied. Error()
// cuts the query it repeats to a few hundred bytes; Query holds it whole.
type IdempotentError struct {
	// Query is the idempotency query that matched, if that was the reason.
	Query query.Query
	// ExistingPosition is the position of the matching event (0 when the reason
	// was a duplicate event id).
	ExistingPosition int64
	// EventID is set when the reason was an event id already stored.
	EventID string
}

func (e *IdempotentError) Error() string {
	if e.EventID != "" {
		return fmt.Sprintf("pgdcb: operation already applied: event id %s is already stored", clip.String(e.EventID))
	}
	return fmt.Sprintf("pgdcb: operation already applied: event at position %d matches idempotency query %s",
		e.ExistingPosition, clip.String(e.Query.String()))
}

// Is makes errors.Is(err, errs.ErrIdempotent) true.
func (e *IdempotentError) Is(target error) bool { return target == errs.ErrIdempotent }
