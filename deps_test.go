package pgdcb_test

import (
	"os/exec"
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
			for _, banned := range []string{"github.com/prometheus/", "go.opentelemetry.io/", "github.com/pgdcb/pgdcb/pgdcbprom", "github.com/pgdcb/pgdcb/pgdcbotel"} {
				require.False(t, strings.HasPrefix(dep, banned), "%s depends on %s", p, dep)
			}
		}
	}
	// And the adapters do not bring the NATS client (package outbox's
	// hooks live in outbox/outboxtrace for that reason).
	for _, p := range []string{"pgdcbprom", "pgdcbotel"} {
		out, err := exec.Command("go", "list", "-deps", "github.com/pgdcb/pgdcb/"+p).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.NotContains(t, string(out), "github.com/nats-io/", "%s depends on the NATS client", p)
	}
}
