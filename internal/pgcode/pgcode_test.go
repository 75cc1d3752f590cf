package pgcode_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgcode"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// Each of pgdcb's own codes is raised by the migrations, as the constant's
// comment says.
func TestOwnCodesAreRaisedByTheMigrations(t *testing.T) {
	t.Parallel()
	script, err := pgdcbsql.Script("pgdcb", 0)
	require.NoError(t, err)
	for _, code := range []string{pgcode.NotReadCommitted, pgcode.NotFirstWrite, pgcode.AppendOnly,
		pgcode.LockKeysUnordered, pgcode.RebaseRefused} {
		t.Run(code, func(t *testing.T) {
			require.Contains(t, script, "ERRCODE = '"+code+"'", code)
		})
	}
	require.NotContains(t, script, "ERRCODE = 'PD006'", "a new code: name it in package pgcode")
}

func TestOf(t *testing.T) {
	t.Parallel()
	require.Empty(t, pgcode.Of(nil))
	require.Empty(t, pgcode.Of(fmt.Errorf("no server error")))
	err := fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: pgcode.UniqueViolation})
	require.Equal(t, pgcode.UniqueViolation, pgcode.Of(err))
	require.True(t, strings.HasPrefix(pgcode.Of(&pgconn.PgError{Code: pgcode.AppendOnly}), "PD"))
}
