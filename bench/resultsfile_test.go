package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRenderFromVersion1: --from renders the report and the chart of a
// results file of the first format (a bare array, grouped rows named
// group/…) without a server: the grouped rows get the headline names, the
// per-call rows /no-group, the rows come in registry order, the missing
// workloads are named, and the chart draws the default path beside the
// per-call path and the floors.
func TestRenderFromVersion1(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := filepath.Join(dir, "old.json")
	row := func(name, group string, writers int, evs, floor float64) string {
		return `{"name":"` + name + `","group":"` + group + `","writers":` + itoa(writers) +
			`,"events_per_s":` + ftoa(evs) + `,"floor_events_per_s":` + ftoa(floor) + `,"ratio":` + ftoa(evs/floor) +
			`,"p50_ms":1,"p99_ms":2,"table_events":10,"floor":"INSERT 1 row","floor_writers":` + itoa(writers) + `,"reps":5,"ops":10,"rep_events_per_s":[1,2,3]}`
	}
	rows := []string{
		row("append/1ev/w1", "append", 1, 1000, 2000),
		row("append/1ev/w1/no-notify", "append-nonotify", 1, 1100, 2000),
		row("appendif/distinct/w8", "appendif", 8, 2000, 5000),
		row("group/append/1ev/w1", "group-append", 1, 1050, 2100),
		row("group/append/1ev/w128", "group-append", 128, 19000, 5000),
		row("group/appendif/distinct/w8", "group-appendif", 8, 2700, 5300),
		row("group/cycle/entity10/w8", "group-cycle", 8, 1200, 4600),
		row("group/runstore/append-event/run-per-writer/w32", "group-runstore", 32, 3900, 5100),
		row("insert-indexed/1ev/w1", "indexed", 1, 2600, 3200),
	}
	require.NoError(t, os.WriteFile(in, []byte("[\n"+strings.Join(rows, ",\n")+"\n]\n"), 0o644))

	svgFile, mdFile, jsonFile := filepath.Join(dir, "t.svg"), filepath.Join(dir, "P.md"), filepath.Join(dir, "new.json")
	var stdout, stderr bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"--from", in, "--svg", svgFile, "--markdown", mdFile, "--json", jsonFile}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "renamed 8 rows")
	require.Contains(t, stderr.String(), "has no row for")
	require.Contains(t, stderr.String(), "append/1ev/w8")

	md := read(t, mdFile)
	var names []string
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| workload") {
			names = append(names, strings.TrimSpace(strings.Split(line, "|")[1]))
		}
	}
	require.Equal(t, []string{
		"append/1ev/w1", "append/1ev/w128", "append/1ev/w1/no-group", "append/1ev/w1/no-group/no-notify",
		"insert-indexed/1ev/w1", "appendif/distinct/w8", "appendif/distinct/w8/no-group", "cycle/entity10/w8",
		"runstore/append-event/run-per-writer/w32",
	}, names)
	require.Contains(t, md, "| append/1ev/w1 | 1 | 10 | 1050 |", "the grouped row carries the plain name")
	require.Contains(t, md, "| append/1ev/w1/no-group | 1 | 10 | 1000 |")
	require.Contains(t, md, "Environment: not recorded")
	require.Contains(t, md, "8 rows were renamed")
	require.Contains(t, md, "Not in this run: ")
	require.Contains(t, md, "`append/1ev/w8`")
	require.Contains(t, md, "--from "+filepath.ToSlash(in))
	require.Contains(t, md, "![throughput against writers](t.svg)")

	svg := read(t, svgFile)
	for _, label := range []string{"Append 1 event, default (grouped)", "AppendIf, default (grouped)",
		"Append 1 event, per call", "AppendIf, per call", "floor: INSERT 1 row, no index", "INSERT 1 row, events' indexes"} {
		require.Contains(t, svg, label)
	}
	require.Contains(t, svg, ">128</text>", "the x axis reaches 128 writers")
	require.Contains(t, svg, "Append 1 event, default (grouped): 128 writers, 19000 events/s")

	// Saved in today's format, the file renders the same table again.
	md2File := filepath.Join(dir, "P2.md")
	stderr.Reset()
	require.NoError(t, run(context.Background(), []string{"--from", jsonFile, "--markdown", md2File}, &stdout, &stderr))
	require.NotContains(t, stderr.String(), "renamed")
	md2 := read(t, md2File)
	require.Equal(t, md[strings.Index(md, "| workload"):], md2[strings.Index(md2, "| workload"):])
	require.Contains(t, md2, "8 rows were renamed")
}

func TestRenderFromNeedsAnOutput(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	require.ErrorContains(t, run(context.Background(), []string{"--from", "x.json"}, &stdout, &stderr), "--from needs")
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
