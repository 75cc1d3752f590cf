package upcast

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/pgdcb/pgdcb/internal/eventversion"
)

// MetadataKey is the metadata key under which an append records the version
// an event of a type with upcasters was written with (a JSON number). An
// event without it was written with version 1. An append that sets it keeps
// the value given (an import of exported events does).
const MetadataKey = eventversion.Key

// Func turns the data of an event of one version of its type into the data
// of the next version. It must be pure: the same input gives the same
// output, whenever and wherever it runs (every read runs it again). It must
// not change data in place.
type Func func(data json.RawMessage) (json.RawMessage, error)

// Registry holds the upcasters and renames of a store's event types. Build
// it before handing it to a store and do not change it afterwards: stores
// read it concurrently. The zero value is an empty registry (events are read
// as stored).
type Registry struct {
	steps   map[string][]Func // type → steps[i] from version i+1 to i+2
	renamed map[string]string // old type name → current name
}

// Register adds the upcaster from version from of eventType to version
// from+1. Steps are registered in order: from must be the type's current
// version (1 for a type without upcasters), so the current version of a
// type is one more than its number of upcasters. eventType must be the
// current name of its type (not one given to Rename as old).
func (r *Registry) Register(eventType string, from int, fn Func) error {
	if fn == nil {
		return fmt.Errorf("pgdcb: upcast: Register(%q, %d): nil function", eventType, from)
	}
	if _, ok := r.renamed[eventType]; ok {
		return fmt.Errorf("pgdcb: upcast: Register(%q, %d): the type was renamed to %q; register under its current name",
			eventType, from, r.renamed[eventType])
	}
	if cur := r.Current(eventType); from != cur {
		return fmt.Errorf("pgdcb: upcast: Register(%q, %d): the type's current version is %d: register the step from %d",
			eventType, from, cur, cur)
	}
	if r.steps == nil {
		r.steps = map[string][]Func{}
	}
	r.steps[eventType] = append(r.steps[eventType], fn)
	return nil
}

// Rename records that events stored with type oldType are now of type
// newType: they are read as newType (at the version they were written with,
// then through newType's upcasters), and a query or an append condition
// that names either name matches the events stored under both (docs/
// LIFECYCLE.md, "Evolving events"). A type renamed again keeps all its old
// names.
func (r *Registry) Rename(oldType, newType string) error {
	switch {
	case oldType == newType:
		return fmt.Errorf("pgdcb: upcast: Rename(%q, %q): the same name", oldType, newType)
	case len(r.steps[oldType]) > 0:
		return fmt.Errorf("pgdcb: upcast: Rename(%q, %q): %q has upcasters: rename before registering them under %q",
			oldType, newType, oldType, newType)
	}
	if _, ok := r.renamed[oldType]; ok {
		return fmt.Errorf("pgdcb: upcast: Rename(%q, %q): %q was already renamed to %q", oldType, newType, oldType, r.renamed[oldType])
	}
	if to, ok := r.renamed[newType]; ok {
		newType = to
	}
	if newType == oldType {
		return fmt.Errorf("pgdcb: upcast: Rename(%q, %q): a cycle", oldType, newType)
	}
	if r.renamed == nil {
		r.renamed = map[string]string{}
	}
	for o, n := range r.renamed {
		if n == oldType {
			r.renamed[o] = newType
		}
	}
	r.renamed[oldType] = newType
	return nil
}

// Current returns the version an event of eventType (either name of a
// renamed type) is read at: 1 plus the number of its upcasters.
func (r *Registry) Current(eventType string) int {
	if r == nil {
		return 1
	}
	if n, ok := r.renamed[eventType]; ok {
		eventType = n
	}
	return 1 + len(r.steps[eventType])
}

// Names returns every name events of eventType's type may be stored with:
// its current name first, then its old names in order. A type never renamed
// has one name.
func (r *Registry) Names(eventType string) []string {
	if r == nil {
		return []string{eventType}
	}
	if n, ok := r.renamed[eventType]; ok {
		eventType = n
	}
	out := []string{eventType}
	for o, n := range r.renamed {
		if n == eventType {
			out = append(out, o)
		}
	}
	slices.Sort(out[1:])
	return out
}

// Version identifies the registry's set of shapes: every type's current
// version and every rename. A decision snapshot is keyed by it, so a
// snapshot folded under one set is never used under another. "" for an
// empty registry.
func (r *Registry) Version() string {
	if r.empty() {
		return ""
	}
	var parts []string
	for t, s := range r.steps {
		parts = append(parts, fmt.Sprintf("v %q %d", t, len(s)+1))
	}
	for o, n := range r.renamed {
		parts = append(parts, fmt.Sprintf("r %q %q", o, n))
	}
	sort.Strings(parts)
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:8])
}

func (r *Registry) empty() bool { return r == nil || (len(r.steps) == 0 && len(r.renamed) == 0) }
