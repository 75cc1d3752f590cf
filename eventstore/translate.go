package eventstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/pgcode"
)

// translate is the one place where server errors become pgdcb errors.
func translate(op string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case pgcode.NotReadCommitted, pgcode.NotFirstWrite:
		return fmt.Errorf("%w: %s", pgdcb.ErrTransactionState, errfmt.Trim(pgErr.Message))
	case pgcode.UniqueViolation:
		if pgErr.ConstraintName == "events_event_id" {
			id := pgErr.Detail
			if i := strings.Index(id, ")=("); i >= 0 {
				id = strings.TrimSuffix(id[i+3:], ") already exists.")
			}
			return &appendif.IdempotentError{EventID: id}
		}
	case pgcode.InvalidTextRepresentation, pgcode.UntranslatableCharacter, // e.g. \u0000 in jsonb
		pgcode.CharacterNotInRepertoire, // invalid UTF-8
		pgcode.NumericValueOutOfRange,   // a JSON number
		pgcode.CheckViolation,           // the type's length
		pgcode.ProgramLimitExceeded,     // a value too large
		pgcode.StatementTooComplex:      // nesting
		// Input is checked before it is sent (see Store.validate); this is the
		// fallback for what the server refuses all the same.
		if op == "append" || op == "import" {
			return &pgdcb.InvalidEventError{Index: -1, Reason: "refused by the server: " + clip.String(pgErr.Message)}
		}
	case pgcode.UndefinedFunction, pgcode.UndefinedTable, pgcode.InvalidSchemaName:
		return fmt.Errorf("%w: %s", pgdcb.ErrNotMigrated, errfmt.Trim(pgErr.Message))
	}
	return err
}
