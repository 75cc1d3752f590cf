package pgdcb_test

import (
	"os"
	"regexp"
	"testing"

	"github.com/pgdcb/pgdcb/internal/version"
)

// releaseHeading is a release's heading in CHANGELOG.md: "## [0.1.0] - 2026-11-29".
var releaseHeading = regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`)

// TestChangelogNamesTheRelease fails when the release `pgdcb version`
// prints (internal/version) is not the top release of CHANGELOG.md: a
// release bumps both, as docs/RELEASING.md says.
func TestChangelogNamesTheRelease(t *testing.T) {
	t.Parallel()
	log, err := os.ReadFile("CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := releaseHeading.FindSubmatch(log)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading `## [X.Y.Z] - YYYY-MM-DD`")
	}
	if got := string(m[1]); got != version.Release {
		t.Fatalf("CHANGELOG.md's top release is %s, internal/version.Release is %s: bump both", got, version.Release)
	}
}
