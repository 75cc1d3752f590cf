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
// (lines "VERSION SHA256", # comments): a step that has run anywhere never
// changes. It returns one message per changed, missing or unlisted step.
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
		if line == "" || strings.HasPrefix(line, "#") {
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
