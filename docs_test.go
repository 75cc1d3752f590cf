package pgdcb_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The documentation is read where users read it: README.md, docs/*.md and
// the Go files (package docs and comments, which go doc shows). Migrations
// have been renumbered and squashed before, and sql/ is restructured, so a
// doc that names a migration must name one that exists; better, it names
// the object (an index, a function) rather than the file.

var (
	// 001_events, 001_events.sql: a migration file, by name.
	migrationFileRe = regexp.MustCompile(`\b(\d{3})_([a-z][a-z0-9_]*)(\.sql)?\b`)
	// "migration 001", "migrations 001 and 002": migrations by number (also
	// across a line break of a Markdown paragraph).
	migrationNumberRe = regexp.MustCompile(`(?i)\bmigrations?\s+(\d{3}(?:\s*(?:,|and|or)\s*\d{3})*)\b`)
	threeDigitsRe     = regexp.MustCompile(`\d{3}`)
	// walletd's start-up line, shown in docs: migrations_applied=N.
	migrationsAppliedRe = regexp.MustCompile(`migrations_applied=(\d+)`)
	// A speed ratio such as 0.64× or 2.4×.
	ratioRe = regexp.MustCompile(`\d+(?:\.\d+)?×`)
)

// docFiles returns README.md, docs/*.md and every Go file of the module
// (vendor and testdata excluded), by path from the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	mds, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	files = append(files, mds...)
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// migrations returns the stems ("001_events") and numbers of the migration
// files of every migration line (sql/migrations for the core,
// runstore/migrations, any other */migrations), and how many the core line
// has (what sql.Migrate applies to a fresh schema).
func migrations(t *testing.T) (stems map[string]bool, numbers map[string]bool, core int) {
	t.Helper()
	files, err := filepath.Glob("*/migrations/*.sql")
	require.NoError(t, err)
	stems, numbers = map[string]bool{}, map[string]bool{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".sql")
		stems[name] = true
		numbers[name[:3]] = true
		if filepath.Dir(f) == filepath.Join("sql", "migrations") {
			core++
		}
	}
	require.NotZero(t, core, "no migrations found under sql/migrations")
	return stems, numbers, core
}

// A doc (README.md, docs/*.md, a Go comment) that names a migration file,
// or a migration by number, names one that exists in a migration line
// (*/migrations); a walletd start-up line shown in a doc applies as many
// migrations as the core line has.
func TestDocsNameOnlyExistingMigrations(t *testing.T) {
	stems, numbers, core := migrations(t)
	var bad []string
	for _, path := range docFiles(t) {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		text := string(b)
		for _, m := range migrationNumberRe.FindAllStringSubmatchIndex(text, -1) {
			at := path + ":" + strconv.Itoa(1+strings.Count(text[:m[0]], "\n"))
			for _, n := range threeDigitsRe.FindAllString(text[m[2]:m[3]], -1) {
				if !numbers[n] {
					bad = append(bad, at+": names migration "+n+" ("+strings.Join(strings.Fields(text[m[0]:m[1]]), " ")+"), which is in no */migrations")
				}
			}
		}
		for i, line := range strings.Split(text, "\n") {
			at := path + ":" + strconv.Itoa(i+1)
			for _, m := range migrationFileRe.FindAllStringSubmatch(line, -1) {
				if stem := m[1] + "_" + m[2]; !stems[stem] {
					bad = append(bad, at+": names migration "+m[0]+", which is in no */migrations")
				}
			}
			for _, m := range migrationsAppliedRe.FindAllStringSubmatch(line, -1) {
				if m[1] != strconv.Itoa(core) {
					bad = append(bad, at+": shows "+m[0]+"; sql.Migrate applies "+strconv.Itoa(core)+" to a fresh schema")
				}
			}
		}
	}
	require.Empty(t, bad, "docs name migrations that do not exist (name the object, an index or function, rather than the file):\n%s",
		strings.Join(bad, "\n"))
}

// The README copies no speed ratio: figures live in the report that
// `make bench` generates (bench/PERFORMANCE.md, with its date, machine and
// load), which the README links; a copy goes stale at the next run.
func TestReadmeCopiesNoRatios(t *testing.T) {
	b, err := os.ReadFile("README.md")
	require.NoError(t, err)
	var bad []string
	for i, line := range strings.Split(string(b), "\n") {
		for _, m := range ratioRe.FindAllString(line, -1) {
			bad = append(bad, "README.md:"+strconv.Itoa(i+1)+": "+m)
		}
	}
	require.Empty(t, bad, "README.md copies speed ratios; link bench/PERFORMANCE.md instead:\n%s", strings.Join(bad, "\n"))
}
