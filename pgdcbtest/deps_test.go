package pgdcbtest_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// Importing pgdcbtest does not import testcontainers-go (and the Docker
// client and the fifty modules behind it): that comes only with
// pgdcbtest/docker, so a user's go.mod pays for it only by importing that.
// (The split is by package, not by build tag: go mod tidy reads every tag.)
func TestKitImportsNoDockerClient(t *testing.T) {
	t.Parallel()
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	kit := deps("github.com/pgdcb/pgdcb/pgdcbtest")
	require.Contains(t, kit, "github.com/pgdcb/pgdcb/eventstore\n", "the list is the kit's dependencies")
	require.NotContains(t, kit, "github.com/testcontainers/")
	require.NotContains(t, kit, "github.com/pgdcb/pgdcb/pgdcbtest/docker\n")
	require.Contains(t, deps("github.com/pgdcb/pgdcb/pgdcbtest/docker"), "github.com/testcontainers/testcontainers-go\n")

}
