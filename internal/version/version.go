// Package version holds pgdcb's release, which `pgdcb version` prints and
// docs/RELEASING.md tags. The top release heading of CHANGELOG.md names it
// (a test of the root package checks that they agree).
package version

import (
	"runtime/debug"
	"strings"
)

// Release is this module's version, without the tag's leading "v".
const Release = "0.1.0"

// Build is what the running binary knows of the commit it was built from.
type Build struct {
	// Commit is the VCS revision (vcs.revision); empty when the binary was
	// not built from a checkout (go install module@version, -buildvcs=false).
	Commit string
	// Modified: the checkout had uncommitted changes (vcs.modified).
	Modified bool
	// Go is the toolchain that built the binary.
	Go string
}

// Read returns the running binary's build information.
func Read() Build {
	var b Build
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Go = bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the release followed by what is known of the build:
// "0.1.0 (commit 5937378abcde, modified, go1.26.8)", "0.1.0 (go1.26.8)"
// without a commit.
func (b Build) String() string {
	var parts []string
	if b.Commit != "" {
		parts = append(parts, "commit "+b.Commit[:min(12, len(b.Commit))])
		if b.Modified {
			parts = append(parts, "modified")
		}
	}
	if b.Go != "" {
		parts = append(parts, b.Go)
	}
	if len(parts) == 0 {
		return Release
	}
	return Release + " (" + strings.Join(parts, ", ") + ")"
}
