package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

// resultsFormat is the version of the results file that --json writes.
// Version 1 (no "format" field) was a bare JSON array of results, with the
// grouped rows named group/… and the per-call rows by the plain names.
const resultsFormat = 2

// resultsFile is what --json writes and --from reads: the results with what
// the report says about the run, so that the report and the chart can be
// rendered again without measuring.
type resultsFile struct {
	Format      int          `json:"format"`
	Environment *environment `json:"environment,omitempty"`
	Run         runInfo      `json:"run"`
	Results     []*Result    `json:"results"`

	// Renamed lists the version-1 names loadResults renamed ("old → new"),
	// kept when such a file is saved again in today's format; Missing the
	// workloads of the run's selection that have no row (filled on
	// loading, never saved).
	Renamed []string `json:"renamed,omitempty"`
	Missing []string `json:"-"`
}

// runInfo is how the workloads were run.
type runInfo struct {
	Quick    bool   `json:"quick"`
	Large    bool   `json:"large"`
	Reps     int    `json:"reps"`
	Duration string `json:"duration"`
	Warmup   string `json:"warmup"`
}

func runInfoOf(o *options) runInfo {
	return runInfo{Quick: o.quick, Large: o.large, Reps: o.reps, Duration: o.duration.String(), Warmup: o.warmup.String()}
}

func writeResultsFile(path string, f *resultsFile) error {
	f.Format = resultsFormat
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// loadResults reads a results file of either version. A version-1 file (a
// bare array) gets today's names (legacyName), no environment and, from the
// reps of its rows, the run's repetitions. The results come back in
// registry order (unknown names last, in file order), and Missing lists the
// registered workloads the run would have selected but that have no row.
func loadResults(path string) (*resultsFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &resultsFile{}
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &f.Results); err != nil {
			return nil, fmt.Errorf("decoding %s (a version-1 results array): %w", path, err)
		}
		f.Format = 1
		for _, r := range f.Results {
			if n, g := legacyName(r.Name, r.Group); n != r.Name {
				f.Renamed = append(f.Renamed, fmt.Sprintf("`%s` → `%s`", r.Name, n))
				r.Name, r.Group = n, g
			}
			f.Run.Reps = max(f.Run.Reps, r.Reps)
		}
	} else {
		if err := json.Unmarshal(raw, f); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", path, err)
		}
		if f.Format != resultsFormat {
			return nil, fmt.Errorf("%s: results format %d, this program reads %d (and version-1 arrays)", path, f.Format, resultsFormat)
		}
	}
	order := map[string]int{}
	for i, w := range registry {
		order[w.Name] = i
	}
	rank := func(r *Result) int {
		if i, ok := order[r.Name]; ok {
			return i
		}
		return len(registry)
	}
	sort.SliceStable(f.Results, func(i, j int) bool { return rank(f.Results[i]) < rank(f.Results[j]) })
	have := map[string]bool{}
	for _, r := range f.Results {
		have[r.Name] = true
	}
	large := f.Run.Large
	for _, r := range f.Results {
		for _, w := range registry {
			if w.Name == r.Name && w.Large {
				large = true
			}
		}
	}
	sel, err := selectWorkloads(&options{quick: f.Run.Quick, large: large})
	if err != nil {
		return nil, err
	}
	for _, w := range sel {
		if !have[w.Name] {
			f.Missing = append(f.Missing, w.Name)
		}
	}
	return f, nil
}

// legacyName maps a version-1 row name (and group) to today's: the grouped
// rows lose their group/ prefix, and the per-call rows that now share the
// plain names get /no-group.
func legacyName(name, group string) (string, string) {
	switch {
	case strings.HasPrefix(name, "group/runstore/"):
		return strings.TrimPrefix(name, "group/"), "runstore-grouped"
	case strings.HasPrefix(name, "group/"):
		return strings.TrimPrefix(name, "group/"), strings.TrimPrefix(group, "group-")
	case strings.HasPrefix(name, "append/1ev/") && strings.HasSuffix(name, "/no-notify"):
		return strings.TrimSuffix(name, "/no-notify") + "/no-group/no-notify", group
	case strings.HasPrefix(name, "append/1ev/"):
		return name + "/no-group", "append-nogroup"
	case strings.HasPrefix(name, "appendif/distinct/"):
		return name + "/no-group", "appendif-nogroup"
	}
	return name, group
}
