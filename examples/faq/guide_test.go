package faq_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// guideBlock is a Go block of docs/FAQ.md with the file it must be cut from,
// named in the HTML comment on the line before it.
var guideBlock = regexp.MustCompile("(?m)^(?:<!-- code: (\\S+) -->\\n)?```go\\n((?s:.*?))\\n```$")

// TestGuideMatchesCode fails when a Go block of docs/FAQ.md is not, verbatim,
// a part of the file of this package it names: it shows only code that
// compiles and that this package's tests run. (docs/GETTING-STARTED.md is a
// module of its own, built and tested by TestGettingStarted in the root
// package.)
func TestGuideMatchesCode(t *testing.T) {
	t.Parallel()
	for doc, least := range map[string]int{"FAQ.md": 3} {
		t.Run(doc, func(t *testing.T) { checkBlocks(t, doc, least) })
	}
}

func checkBlocks(t *testing.T, doc string, least int) {
	guide, err := os.ReadFile(filepath.Join("..", "..", "docs", doc))
	if err != nil {
		t.Fatal(err)
	}
	blocks := guideBlock.FindAllStringSubmatch(string(guide), -1)
	if len(blocks) < least {
		t.Fatalf("found %d Go blocks in docs/%s; want %d at least", len(blocks), doc, least)
	}
	for i, b := range blocks {
		name, code := b[1], b[2]
		if name == "" {
			t.Errorf("Go block %d has no <!-- code: FILE --> line before it:\n%s", i+1, code)
			continue
		}
		if filepath.Dir(name) != "examples/faq" {
			t.Errorf("Go block %d names %s, outside examples/faq", i+1, name)
			continue
		}
		src, err := os.ReadFile(filepath.Base(name))
		if err != nil {
			t.Errorf("Go block %d: %v", i+1, err)
			continue
		}
		if !strings.Contains(string(src), code) {
			t.Errorf("Go block %d is not part of %s as it stands; copy the code again:\n%s", i+1, name, code)
		}
	}
}

// TestDocsIndex fails when a file of docs/ is not listed in docs/README.md,
// or the index links a file that does not exist.
func TestDocsIndex(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "docs")
	index, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			name += "/"
		}
		if name != "README.md" && !strings.Contains(string(index), "]("+name+")") {
			t.Errorf("docs/%s is not listed in docs/README.md", name)
		}
	}
	for _, m := range regexp.MustCompile(`\]\(([^)]+)\)`).FindAllStringSubmatch(string(index), -1) {
		if _, err := os.Stat(filepath.Join(dir, m[1])); err != nil {
			t.Errorf("docs/README.md links %s: %v", m[1], err)
		}
	}
}
