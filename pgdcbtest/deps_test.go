package pgdcbtest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Importing pgdcbtest does not import testcontainers-go (and the Docker
// client and the fifty modules behind it): that comes only with the module
// pgdcbtest/docker, so a user's go.mod pays for it only by requiring that.
// (The split is by module, not by build tag: go mod tidy reads every tag.)
func TestKitImportsNoDockerClient(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/pgdcb/pgdcb/pgdcbtest").CombinedOutput()
	require.NoError(t, err, "%s", out)
	kit := string(out)
	require.Contains(t, kit, "github.com/pgdcb/pgdcb/eventstore\n", "the list is the kit's dependencies")
	require.NotContains(t, kit, "github.com/testcontainers/")
	require.NotContains(t, kit, "github.com/pgdcb/pgdcb/pgdcbtest/docker\n")
}

// maxUserModules bounds the modules in the go.sum of a module that imports
// the store, memstore and this kit (issue 37: about 70 before the optional
// parts became modules of their own).
const maxUserModules = 25

// What a user's module pays: a fresh module outside the repository, whose
// test imports eventstore, memstore and pgdcbtest, with this checkout as
// github.com/pgdcb/pgdcb (a replace), after go mod tidy: its go.sum names
// at most maxUserModules modules, none of the optional parts' libraries.
func TestUserModuleGoSum(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	dir := t.TempDir()
	write := func(name, text string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644))
	}
	write("go.mod", "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/pgdcb/pgdcb v0.0.0\n\nreplace github.com/pgdcb/pgdcb => "+root+"\n")
	write("user_test.go", `package user

import (
	"testing"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/pgdcbtest"
)

var _ pgdcb.Store = (*eventstore.Store)(nil)

func TestStores(t *testing.T) {
	mem, err := memstore.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []pgdcb.Store{mem, pgdcbtest.NewStore(t, nil)} {
		_ = s
	}
}
`)
	tidy := exec.Command("go", "mod", "tidy")
	tidy.Dir = dir
	tidy.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := tidy.CombinedOutput()
	require.NoError(t, err, "go mod tidy: %s", out)
	vet := exec.Command("go", "vet", ".")
	vet.Dir, vet.Env = dir, tidy.Env
	out, err = vet.CombinedOutput()
	require.NoError(t, err, "go vet (the module compiles): %s", out)
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	mods := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(sum)), "\n") {
		mods[strings.Fields(line)[0]] = true
	}
	for m := range mods {
		for _, p := range []string{"github.com/testcontainers/", "github.com/docker/", "github.com/moby/", "github.com/nats-io/", "go.opentelemetry.io/", "github.com/prometheus/"} {
			require.False(t, strings.HasPrefix(m, p), "the user's go.sum names %s", m)
		}
	}
	require.LessOrEqual(t, len(mods), maxUserModules, "modules in the user's go.sum:\n%s", sum)
	t.Logf("%d modules in the user's go.sum", len(mods))
}
