// Package ident quotes SQL identifiers for the packages of this module that
// write their own statements against a store's schema (commands, effects,
// projection, runstore). It replaces a public accessor on eventstore.Store:
// users who write SQL against the schema quote it themselves with
// pgx.Identifier{store.Schema()}.Sanitize().
package ident

import "github.com/jackc/pgx/v5"

// Quote returns name as a quoted SQL identifier.
func Quote(name string) string { return pgx.Identifier{name}.Sanitize() }

// Schema returns the quoted name of s's schema. s is an *eventstore.Store
// (or anything with its Schema method).
func Schema(s interface{ Schema() string }) string { return Quote(s.Schema()) }
