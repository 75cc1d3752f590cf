package migrate

import (
	"bufio"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
)

// CheckPinned compares steps with the checksums pinned in the file at path
// (lines "VERSION SHA256", # comments; the "functions" line is
// CheckPinnedFunctions'): a step that has run anywhere never changes. It
// returns one message per changed, missing or unlisted step.
func CheckPinned(path string, steps []Migration) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pinned := map[int]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, functionsPin) {
			continue
		}
		v, sum, ok := strings.Cut(line, " ")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		pinned[n] = sum
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var problems []string
	for _, m := range steps {
		sum, ok := pinned[m.Version]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("migration %03d_%s is not in %s: append `%d %s` (new migrations only)", m.Version, m.Name, path, m.Version, m.Checksum()))
		case sum != m.Checksum():
			problems = append(problems, fmt.Sprintf("migration %03d_%s changed after it was numbered: restore it and make the change a new migration", m.Version, m.Name))
		}
		delete(pinned, m.Version)
	}
	var gone []int
	for v := range pinned {
		gone = append(gone, v)
	}
	sort.Ints(gone)
	for _, v := range gone {
		problems = append(problems, fmt.Sprintf("%s lists migration %d, which no longer exists", path, v))
	}
	return problems, nil
}

// functionsPin starts the line of a checksums file that pins the server
// functions: "functions STEP SHA256".
const functionsPin = "functions "

// FunctionsChecksum is the SHA-256 of the functions' names and checksums, in
// order, hex-encoded: one value that changes whenever any function's text
// does.
func FunctionsChecksum(fns []Function) string {
	var b strings.Builder
	for _, f := range fns {
		b.WriteString(f.Name + " " + f.Checksum() + "\n")
	}
	return checksum(b.String())
}

// CheckPinnedFunctions compares the functions with the line "functions STEP
// SHA256" of the file at path: the functions as they were at step STEP. A
// change of their text needs a step after STEP (latest is the line's
// highest), so that a schema migrated with the new text is newer, by its
// steps, than every library before it: an older library refuses it (see
// unknownSteps) instead of running against, or migrating back, functions it
// does not know. It returns what to do, or nothing when the pin holds.
func CheckPinnedFunctions(path string, latest int, fns []Function) ([]string, error) {
	body, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := FunctionsChecksum(fns)
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), functionsPin)
		if !ok {
			continue
		}
		v, pinned, ok := strings.Cut(rest, " ")
		step, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		switch {
		case pinned == sum:
			return nil, nil
		case step < latest:
			return []string{fmt.Sprintf("the server functions changed since step %d: pin them at step %d, `functions %d %s` in %s", step, latest, latest, sum, path)}, nil
		default:
			return []string{fmt.Sprintf("the server functions changed since step %d, the latest: add a numbered step (it may hold only a comment saying which functions changed), then pin `functions %d %s` in %s", step, latest+1, sum, path)}, nil
		}
	}
	return []string{fmt.Sprintf("%s pins no server functions: add `functions %d %s`", path, latest, sum)}, nil
}
