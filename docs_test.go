package pgdcb_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"

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

// docsWordLimit is the most words (as `wc -w docs/*.md` counts them) the
// prose of docs/ may hold: guides say how, reference says what holds.
const docsWordLimit = 40000

// generatedReports are the measured reports, excluded from the word count
// because they live beside the programs that write them, never in docs/.
var generatedReports = []string{
	"bench/PERFORMANCE.md",       // make bench
	"bench/PROFILE.md",           // hand-written profile of measured runs
	"bench/tagindex/TAGINDEX.md", // make bench-tagindex
}

// The prose of docs/*.md stays within docsWordLimit words, and no
// generated report is back in docs/.
func TestDocsWordLimit(t *testing.T) {
	mds, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	for _, r := range generatedReports {
		_, err := os.Stat(r)
		require.NoError(t, err, "generated report %s", r)
		require.NotContains(t, mds, filepath.Join("docs", filepath.Base(r)), "%s belongs in %s, not docs/", filepath.Base(r), filepath.Dir(r))
	}
	total, per := 0, []string{}
	for _, f := range mds {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		n := len(strings.Fields(string(b)))
		total += n
		per = append(per, f+": "+strconv.Itoa(n))
	}
	require.LessOrEqual(t, total, docsWordLimit, "docs/*.md hold %d words; cut repetition and history rather than add:\n%s",
		total, strings.Join(per, "\n"))
}

var (
	// A page of docs/, optionally followed by a quoted section: docs/FAULTS.md,
	// "Settled outcomes" (the quote may be cut by the end of a line).
	docRefRe = regexp.MustCompile(`\bdocs/([A-Za-z0-9_-]+\.md)(?:,? "([^"\n]+))?`)
	// A Markdown link's target.
	mdLinkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// A Markdown heading.
	headingRe = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
)

// headings returns the headings of the Markdown file at path (lower-cased,
// spaces collapsed) and their GitHub anchors; nil when it does not exist.
func headings(t *testing.T, path string) (texts []string, anchors map[string]bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	anchors = map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRe.FindAllStringSubmatch(string(b), -1) {
		h := strings.ToLower(strings.Join(strings.Fields(m[1]), " "))
		texts = append(texts, h)
		var slug strings.Builder
		for _, r := range strings.ReplaceAll(h, "`", "") {
			switch {
			case r == ' ':
				slug.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				slug.WriteRune(r)
			}
		}
		a := slug.String()
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		}
		seen[a]++
		anchors[a] = true
	}
	return texts, anchors
}

// Every page of docs/ that README.md, a page of docs/ or a Go or SQL comment
// points to exists, and so does the section it names in quotes; every
// relative Markdown link of README.md, docs/*.md and bench/**.md resolves,
// anchor included. (CHANGELOG.md names files as they were then.)
func TestDocsReferencesResolve(t *testing.T) {
	files := docFiles(t)
	sqls, err := filepath.Glob("*/functions/*.sql")
	require.NoError(t, err)
	migs, err := filepath.Glob("*/migrations/*.sql")
	require.NoError(t, err)
	files = append(append(append(files, sqls...), migs...), generatedReports...)
	var bad []string
	for _, path := range files {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		text := string(b)
		at := func(i int) string { return path + ":" + strconv.Itoa(1+strings.Count(text[:i], "\n")) }
		for _, m := range docRefRe.FindAllStringSubmatchIndex(text, -1) {
			name := text[m[2]:m[3]]
			texts, _ := headings(t, filepath.Join("docs", name))
			if texts == nil {
				bad = append(bad, at(m[0])+": docs/"+name+" does not exist")
				continue
			}
			if m[4] < 0 {
				continue
			}
			section := strings.ToLower(strings.Join(strings.Fields(strings.TrimRight(text[m[4]:m[5]], " ,.;:")), " "))
			found := false
			for _, h := range texts {
				found = found || strings.Contains(h, section)
			}
			if !found {
				bad = append(bad, at(m[0])+": docs/"+name+" has no section \""+section+"\"")
			}
		}
		if !strings.HasSuffix(path, ".md") {
			continue
		}
		for _, m := range mdLinkRe.FindAllStringSubmatchIndex(text, -1) {
			target := text[m[2]:m[3]]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			full := path
			if file != "" {
				full = filepath.Join(filepath.Dir(path), file)
			}
			if _, err := os.Stat(full); err != nil {
				bad = append(bad, at(m[0])+": links "+target+", which does not exist")
				continue
			}
			if anchor == "" || !strings.HasSuffix(full, ".md") {
				continue
			}
			if _, anchors := headings(t, full); !anchors[anchor] {
				bad = append(bad, at(m[0])+": links "+target+", which has no such heading")
			}
		}
	}
	require.Empty(t, bad, "references into the docs that do not resolve:\n%s", strings.Join(bad, "\n"))
}

var (
	// A figure with a unit of time, rate or ratio: 0.3 ms, 120-240 ms,
	// 2,000 events/s, 5×, 90 times.
	figureRe = regexp.MustCompile(`\d(?:[\d,.]*\d)?(?:\s?-\s?\d[\d,.]*)?\s?(?:ms|µs|us|ns|s|ev/s|events/s|k?events per second|×|times)\b|\d×`)
	// Words that make a figure a measurement rather than a setting.
	measuredRe = regexp.MustCompile(`(?i)\b(?:measured|measuring|measures? (?:at|about)|p50|p95|p99|median|benchmarked|faster|slower|took|per\s+(?:call|read|event|append|statement))\b`)
)

// No Go comment quotes a measured figure: figures go stale at the next
// run and live in the generated reports (bench/PERFORMANCE.md). The rule is
// narrow: a sentence of a comment block that has a figure with a unit of
// time or rate (or a ratio) and a word that makes it a measurement
// ("measured", "p99", "median", "slower", "per call", ...). A default or a
// limit ("0: the default, 100ms") is no measurement. The benchmark
// programs (bench/) and tests describe their workloads and are exempt.
func TestCommentsQuoteNoMeasuredFigures(t *testing.T) {
	var bad []string
	for _, path := range docFiles(t) {
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.HasPrefix(path, "bench"+string(filepath.Separator)) {
			continue
		}
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); {
			if !strings.HasPrefix(strings.TrimSpace(lines[i]), "//") {
				i++
				continue
			}
			start, block := i, []string{}
			for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "//"); i++ {
				block = append(block, strings.TrimPrefix(strings.TrimSpace(lines[i]), "//"))
			}
			for _, sentence := range strings.Split(strings.Join(block, " "), ". ") {
				if figureRe.MatchString(sentence) && measuredRe.MatchString(sentence) {
					bad = append(bad, path+":"+strconv.Itoa(start+1)+": "+strings.Join(strings.Fields(sentence), " "))
				}
			}
		}
	}
	require.Empty(t, bad, "Go comments quote measured figures (they go stale; link the report or say what holds instead):\n%s",
		strings.Join(bad, "\n"))
}
