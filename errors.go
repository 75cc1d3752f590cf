// Package pgdcb is a Dynamic Consistency Boundary event store on PostgreSQL.
//
// This root package holds the sentinel errors every other package matches with
// errors.Is; the store itself lives in package eventstore, tags in package tags,
// queries in package query, append conditions in package appendif and cursors in
// package cursor.
package pgdcb

import "errors"

// Sentinel errors. Typed errors carrying detail (which tag, which event, which
// cursor) match them through errors.Is; use errors.As to read the detail.
var (
	// ErrInvalidTag: a tag is not `key=value` with a valid key and value.
	ErrInvalidTag = errors.New("pgdcb: invalid tag")
	// ErrInvalidQuery: a query or one of its items is invalid (an empty query where
	// one is required, an empty or too long type).
	ErrInvalidQuery = errors.New("pgdcb: invalid query")
	// ErrInvalidEvent: an event to append is invalid (type, data, metadata, batch size).
	ErrInvalidEvent = errors.New("pgdcb: invalid event")
	// ErrInvalidCursor: a cursor string cannot be decoded.
	ErrInvalidCursor = errors.New("pgdcb: invalid cursor")
	// ErrInvalidSchema: a schema name is not a plain lower-case identifier.
	ErrInvalidSchema = errors.New("pgdcb: invalid schema name")
	// ErrConditionFailed: AppendIf found an event matching FailIfEventsMatch that
	// the decision did not see. Nothing was appended; re-read and decide again.
	ErrConditionFailed = errors.New("pgdcb: append condition failed")
	// ErrIdempotent: the idempotency query matched an event already in the log (or
	// an event id was already stored): the operation was applied before. Nothing
	// was appended.
	ErrIdempotent = errors.New("pgdcb: operation already applied")
	// ErrTransactionState: an append ran in a transaction it cannot be correct in
	// (not READ COMMITTED, or not the transaction's first write).
	ErrTransactionState = errors.New("pgdcb: append refused in this transaction")
	// ErrNotMigrated: the store's schema is missing or older than this library.
	ErrNotMigrated = errors.New("pgdcb: schema not migrated")
	// ErrTransactionIDsAhead: the log holds transaction ids the server has not
	// handed out yet (it was restored into another cluster); appends would sort
	// before older events. See sql.RebaseTransactionIDs.
	ErrTransactionIDsAhead = errors.New("pgdcb: stored transaction ids are ahead of the server")
)
