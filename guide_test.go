package pgdcb_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
)

// guideStep is a block of docs/GETTING-STARTED.md that the guide's module is
// made of: a Go block marked <!-- file: NAME --> (appended to that file) or a
// shell block marked <!-- run --> (run where the reader runs it).
var guideStep = regexp.MustCompile("(?m)^<!-- (file: (\\S+)|run) -->\\n```(go|sh)\\n((?s:.*?))\\n```$")

// anyGoBlock is every Go block of the page, marked or not.
var anyGoBlock = regexp.MustCompile("(?m)^```go$")

// guideScript turns the page into one shell script, in page order: the run
// blocks as they are, each Go block appended to its file. It checks that
// every Go block is marked, that each file starts with its package clause,
// and that the prose just above a Go block names its file.
func guideScript(page string) (script string, files []string, err error) {
	steps := guideStep.FindAllStringSubmatchIndex(page, -1)
	if n := len(anyGoBlock.FindAllStringIndex(page, -1)); n != countGo(page, steps) {
		return "", nil, fmt.Errorf("%d Go blocks, %d of them marked <!-- file: NAME -->: mark every one", n, countGo(page, steps))
	}
	var b strings.Builder
	b.WriteString("set -euo pipefail\n")
	seen := map[string]bool{}
	for _, m := range steps {
		at, name, lang, body := m[0], sub(page, m, 2), sub(page, m, 3), sub(page, m, 4)
		if name == "" { // <!-- run -->
			if lang != "sh" {
				return "", nil, fmt.Errorf("a <!-- run --> block is %s, not sh", lang)
			}
			b.WriteString(body + "\n")
			continue
		}
		if lang != "go" {
			return "", nil, fmt.Errorf("<!-- file: %s --> marks a %s block", name, lang)
		}
		if above := page[max(0, at-400):at]; !strings.Contains(above, "`"+name+"`") {
			return "", nil, fmt.Errorf("the prose above a block of %s does not name it (`%s`): a reader cannot see the marker", name, name)
		}
		if !seen[name] {
			if !strings.HasPrefix(body, "package ") {
				return "", nil, fmt.Errorf("the first block of %s does not start with its package clause", name)
			}
			seen[name] = true
			files = append(files, name)
		}
		fmt.Fprintf(&b, "cat >>%s <<'GUIDE_BLOCK_END'\n%s\n\nGUIDE_BLOCK_END\n", name, body)
	}
	return b.String(), files, nil
}

func countGo(page string, steps [][]int) int {
	n := 0
	for _, m := range steps {
		if sub(page, m, 3) == "go" {
			n++
		}
	}
	return n
}

func sub(s string, m []int, i int) string {
	if m[2*i] < 0 {
		return ""
	}
	return s[m[2*i]:m[2*i+1]]
}

// TestGettingStarted follows docs/GETTING-STARTED.md as a reader does, in a
// directory outside the repository: it runs the page's <!-- run --> blocks
// (go mod init, a replace of github.com/pgdcb/pgdcb by this checkout, then
// go mod tidy, go vet and go test) with the page's Go blocks written to their
// files in between. The guide's tests run against this package's test
// server (PGDCB_TEST_DATABASE_URL, set by TestMain). With the shared module
// cache holding pgdcb's requirements, it needs no network.
func TestGettingStarted(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(filepath.Join("docs", "GETTING-STARTED.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, files, err := guideScript(string(page))
	if err != nil {
		t.Fatalf("docs/GETTING-STARTED.md: %v", err)
	}
	if len(files) < 4 {
		t.Fatalf("docs/GETTING-STARTED.md makes %d files (%v); want the guide's module", len(files), files)
	}
	checkout, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t) // TestMain found the server; without one, the package fails
	dir := t.TempDir()   // outside the repository: no go.work, no parent go.mod
	cmd := exec.CommandContext(t.Context(), "bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"PGDCB="+checkout,
		"PGDCB_TEST_DATABASE_URL="+dsn,
		"GOFLAGS=-mod=mod",
		"GOWORK=off",
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("following docs/GETTING-STARTED.md (files %v) failed: %v\n%s", files, err, out)
	}
	if !strings.Contains(string(out), "ok  \texample.com/courses") {
		t.Fatalf("go test of the guide's module ran no tests:\n%s", out)
	}
	t.Logf("the guide's module %v:\n%s", files, out)
}
