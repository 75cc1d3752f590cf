package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/appendif"
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
	case "22P02", "22P05": // invalid text / untranslatable character (e.g. \u0000 in jsonb)
		if op == "append" {
			return &InvalidEventError{Index: -1, Reason: pgErr.Message}
		}
	case "42883", "42P01", "3F000": // undefined function / table / schema
		return fmt.Errorf("%w: %s", pgdcb.ErrNotMigrated, pgErr.Message)
	}
	return err
}
