package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/appendif"
	"github.com/pgdcb/pgdcb/internal/clip"
)

// translate is the one place where server errors become pgdcb errors.
func translate(op string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "PD001", "PD002":
		return fmt.Errorf("%w: %s", pgdcb.ErrTransactionState, pgErr.Message)
	case "23505": // unique_violation
		if pgErr.ConstraintName == "events_event_id" {
			id := pgErr.Detail
			if i := strings.Index(id, ")=("); i >= 0 {
				id = strings.TrimSuffix(id[i+3:], ") already exists.")
			}
			return &appendif.IdempotentError{EventID: id}
		}
	case "22P02", "22P05", // invalid text / untranslatable character (e.g. \u0000 in jsonb)
		"22021",          // character not in repertoire (invalid UTF-8)
		"22003",          // numeric value out of range (a JSON number)
		"23514",          // check violation (the type's length)
		"54000", "54001": // program limit exceeded (a value too large), statement too complex (nesting)
		// Input is checked before it is sent (see Store.validate); this is the
		// fallback for what the server refuses all the same.
		if op == "append" {
			return &InvalidEventError{Index: -1, Reason: "refused by the server: " + clip.String(pgErr.Message)}
		}
	case "42883", "42P01", "3F000": // undefined function / table / schema
		return fmt.Errorf("%w: %s", pgdcb.ErrNotMigrated, pgErr.Message)
	}
	return err
}
