package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/version"
)

// TestVersionOfABuiltBinary builds pgdcb as a user does (go build, VCS
// stamping on) and runs `pgdcb version`: it prints the release, and the
// commit the binary was stamped with. In a clone (CI's) the stamp must be
// there; Go does not stamp builds in a git worktree (.git is a file there).
func TestVersionOfABuiltBinary(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "pgdcb")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	bi, err := buildinfo.ReadFile(bin)
	require.NoError(t, err)
	var commit string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	root, err := exec.CommandContext(t.Context(), "git", "rev-parse", "--show-toplevel").Output()
	if err == nil {
		if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(root)), ".git")); err == nil && fi.IsDir() {
			require.NotEmpty(t, commit, "built in a git clone, yet no vcs.revision stamped")
		}
	}

	got, err := exec.CommandContext(t.Context(), bin, "version").Output()
	require.NoError(t, err)
	line := strings.TrimSpace(string(got))
	require.True(t, strings.HasPrefix(line, "pgdcb "+version.Release+" ("), line)
	if commit != "" {
		require.Contains(t, line, "commit "+commit[:12])
		require.Equal(t, modified, strings.Contains(line, ", modified,"), line)
	} else {
		require.NotContains(t, line, "commit", "no commit stamped, none printed")
		t.Logf("no commit stamped (not a git clone): %s", line)
	}
	require.Contains(t, line, bi.GoVersion)
}
