package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// cliMainEnv makes the test binary run main() with the arguments in
// cliArgsEnv (separated by the unit separator, 0x1f), so that a test can see its exit code.
const (
	cliMainEnv = "PGDCB_CLI_TEST_MAIN"
	cliArgsEnv = "PGDCB_CLI_TEST_ARGS"
)

func TestNegativeLimitIsAUsageError(t *testing.T) {
	if os.Getenv(cliMainEnv) != "" {
		os.Args = append([]string{"pgdcb"}, strings.Split(os.Getenv(cliArgsEnv), "\x1f")...)
		main()
		os.Exit(0)
	}
	t.Parallel()
	ctx := context.Background()
	dsn, schema := pgtest.DSN(t), pgtest.Schema(t)
	base := []string{"-dsn", dsn, "-schema", schema}
	require.NoError(t, execute(ctx, append(base, "migrate"), nil, &bytes.Buffer{}, &bytes.Buffer{}))

	var out, errOut bytes.Buffer
	err := execute(ctx, append(base, "read", "-limit", "-5"), nil, &out, &errOut)
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.Contains(t, err.Error(), "-limit: must not be negative (got -5; 0 means all)")
	require.Empty(t, out.String(), "nothing read")

	cmd := exec.Command(os.Args[0], "-test.run=^TestNegativeLimitIsAUsageError$")
	cmd.Env = append(os.Environ(), cliMainEnv+"=1",
		cliArgsEnv+"="+strings.Join(append(base, "read", "-limit", "-5"), "\x1f"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "want an exit error, got %v (stderr %s)", err, stderr.String())
	require.Equal(t, 2, exit.ExitCode(), stderr.String())
	require.Contains(t, stderr.String(), "pgdcb: read: invalid argument -limit: must not be negative (got -5")

	// 0 still means all.
	require.NoError(t, execute(ctx, append(base, "read", "-limit", "0"), nil, &out, &errOut))
}
