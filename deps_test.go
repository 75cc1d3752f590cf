package pgdcb_test

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The components report through their own Tracer interfaces: none of them
// depends on Prometheus or OpenTelemetry, directly or not (depguard, in make
// lint, checks the direct imports of every package; this checks what an
// importer of each component pays). The adapters alone bring them.
func TestComponentsDependOnNoObservabilityLibrary(t *testing.T) {
	t.Parallel()
	pkgs := []string{"commands", "subscription", "projection", "outbox", "effects", "runstore", "logical"}
	for _, p := range pkgs {
		out, err := exec.Command("go", "list", "-deps", "github.com/pgdcb/pgdcb/"+p).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "github.com/jackc/pgx/v5\n", "the list is %s's dependencies", p)
		for _, dep := range strings.Fields(string(out)) {
			for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/nats-io/", "github.com/pgdcb/pgdcb/pgdcbprom", "github.com/pgdcb/pgdcb/pgdcbotel"} {
				require.False(t, strings.HasPrefix(dep, banned), "%s depends on %s", p, dep)
			}
		}
	}
}

// The store abstraction compiles without pgx: the vocabulary (this root
// package), the packages it is made of, the in-memory store and the
// conformance suite. Code written against pgdcb.Store, and its tests on
// memstore, never link the PostgreSQL driver.
func TestCoreImportsNoPgx(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "/query", "/tags", "/cursor", "/append", "/memstore", "/eventstore/conformance"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/pgdcb/pgdcb"+p).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "github.com/pgdcb/pgdcb"+p+"\n", "the list is github.com/pgdcb/pgdcb%s's dependencies", p)
		require.NotContains(t, string(out), "github.com/jackc/", "github.com/pgdcb/pgdcb%s depends on pgx", p)
	}
}

// optional are the module path prefixes of the optional parts' libraries,
// each the dependency of one nested module: the Docker client behind
// testcontainers-go (pgdcbtest/docker), NATS (outbox/jspublisher),
// OpenTelemetry (pgdcbotel) and Prometheus (pgdcbprom).
var optional = map[string][]string{
	"pgdcbtest/docker":   {"github.com/testcontainers/", "github.com/docker/", "github.com/moby/", "github.com/containerd/"},
	"outbox/jspublisher": {"github.com/nats-io/"},
	"pgdcbotel":          {"go.opentelemetry.io/"},
	"pgdcbprom":          {"github.com/prometheus/"},
}

// requires returns the requirements of the go.mod file at path.
func requires(t *testing.T, path string) []string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", path).Output()
	require.NoError(t, err, "go mod edit -json %s", path)
	var mod struct{ Require []struct{ Path string } }
	require.NoError(t, json.Unmarshal(out, &mod))
	var paths []string
	for _, r := range mod.Require {
		paths = append(paths, r.Path)
	}
	return paths
}

// The core module requires none of the optional parts' libraries, not even
// for a test (go.mod lists what the tests of the module's packages import):
// they live in nested modules, each with a go.mod of its own that builds
// against this checkout (replace => the repository root), and each brings
// only its own library among them.
func TestCoreModuleRequiresNoOptionalLibrary(t *testing.T) {
	t.Parallel()
	core := requires(t, "go.mod")
	require.Contains(t, core, "github.com/jackc/pgx/v5", "the list is the core's requirements")
	for mod, prefixes := range optional {
		for _, r := range core {
			for _, p := range prefixes {
				require.False(t, strings.HasPrefix(r, p), "the core go.mod requires %s (%s belongs in the module %s)", r, p, mod)
			}
			require.NotEqual(t, "github.com/pgdcb/pgdcb/"+mod, r, "the core go.mod requires the module %s", mod)
		}
	}
	// The whole module graph, not only the listed requirements.
	out, err := exec.Command("go", "list", "-m", "all").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		m := strings.Fields(line)[0]
		for mod, prefixes := range optional {
			for _, p := range prefixes {
				require.False(t, strings.HasPrefix(m, p), "the core's module graph holds %s (belongs to %s)", m, mod)
			}
		}
	}

	for mod := range optional {
		gomod := filepath.Join(filepath.FromSlash(mod), "go.mod")
		out, err := exec.Command("go", "mod", "edit", "-json", gomod).Output()
		require.NoError(t, err, "%s: every optional part is a module of its own", gomod)
		var m struct {
			Module  struct{ Path string }
			Replace []struct{ Old, New struct{ Path string } }
		}
		require.NoError(t, json.Unmarshal(out, &m))
		require.Equal(t, "github.com/pgdcb/pgdcb/"+mod, m.Module.Path)
		root := strings.Repeat("../", strings.Count(mod, "/")+1)
		require.Contains(t, m.Replace, struct{ Old, New struct{ Path string } }{
			Old: struct{ Path string }{"github.com/pgdcb/pgdcb"}, New: struct{ Path string }{strings.TrimSuffix(root, "/")},
		}, "%s builds against this checkout", gomod)
		// No nested module brings another's library (testcontainers-go
		// itself brings OpenTelemetry into pgdcbtest/docker).
		if mod == "pgdcbtest/docker" {
			continue
		}
		for other, prefixes := range optional {
			if other == mod {
				continue
			}
			for _, r := range requires(t, gomod) {
				for _, p := range prefixes {
					require.False(t, strings.HasPrefix(r, p), "%s requires %s, the library of %s", gomod, r, other)
				}
			}
		}
	}
}
