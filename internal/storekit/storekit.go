// Package storekit holds what every store implementation shares, so that
// they refuse the same input and fold the same way: memstore and the
// PostgreSQL store (without pgx, for memstore).
package storekit

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/cfgcheck"
	"github.com/pgdcb/pgdcb/internal/clip"
	"github.com/pgdcb/pgdcb/internal/pgjson"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// ValidateEvents checks a batch as Append does before anything is sent: every
// string the server would refuse (invalid UTF-8, NUL), every JSON text jsonb
// would refuse (see package internal/pgjson), the sizes against cfg's limits
// (as ResolveLimits returns them), duplicate event ids. It fails with a
// *pgdcb.InvalidEventError: every store refuses what PostgreSQL's refuses.
func ValidateEvents(cfg Limits, events []pgdcb.Event) error {
	if len(events) == 0 {
		return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: "no events"}
	}
	if len(events) > cfg.MaxBatchSize {
		return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: fmt.Sprintf("%d events, more than MaxBatchSize %d", len(events), cfg.MaxBatchSize)}
	}
	// Sizes first: cheap, and a 50 MB payload is refused before it is read.
	total := 0
	for i, e := range events {
		if err := query.ValidateType(e.Type); err != nil {
			reason := err.Error()
			if te, ok := err.(*query.InvalidTypeError); ok {
				reason = te.Reason
			}
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "type", Reason: reason}
		}
		size := e.Size()
		if size > cfg.MaxEventBytes {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "size", Reason: fmt.Sprintf(
				"%d bytes (type, tags, data and metadata), more than MaxEventBytes %d", size, cfg.MaxEventBytes)}
		}
		total += size
		if total > cfg.MaxBatchBytes {
			return &pgdcb.InvalidEventError{Index: -1, Field: "batch", Reason: fmt.Sprintf(
				"more than MaxBatchBytes %d bytes (type, tags, data and metadata of its events; %d by event %d)",
				cfg.MaxBatchBytes, total, i)}
		}
	}
	var seen map[uuid.UUID]int
	for i, e := range events {
		if len(e.Data) == 0 {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: "empty (use {} or null for no payload)"}
		}
		if err := pgjson.Validate(e.Data); err != nil {
			return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "data", Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
		}
		if len(e.Metadata) > 0 {
			if err := pgjson.Validate(e.Metadata); err != nil {
				return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "metadata", Reason: "not valid JSON for PostgreSQL's jsonb: " + err.Error()}
			}
		}
		if e.ID != uuid.Nil {
			if seen == nil {
				seen = make(map[uuid.UUID]int)
			}
			if j, dup := seen[e.ID]; dup {
				return &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "id", Reason: fmt.Sprintf("event id %s repeats event %d of the batch", e.ID, j)}
			}
			seen[e.ID] = i
		}
	}
	return nil
}

// Fold is Project over a read: it reads the union of the projectors' queries
// with read (forward, no limit, no cursor), hands each event to every
// projector whose own query matches it, and returns FailIf(union, &cursor).
// Snapshots aside, which only spare work, the results are the store's.
func Fold(read func(query.Query) pgdcb.Events, reg *upcast.Registry, projectors ...pgdcb.Projector) (appendif.Condition, error) {
	if len(projectors) == 0 {
		return appendif.Condition{}, errors.New("pgdcb: project: no projectors")
	}
	if err := ValidateSnapshotKeys(projectors); err != nil {
		return appendif.Condition{}, err
	}
	var union query.Query
	queries := make([]query.Query, len(projectors))
	for i, p := range projectors {
		queries[i] = Expand(reg, p.Query())
		union = union.Or(queries[i])
	}
	es := read(union)
	for ev, err := range es.All() {
		if err != nil {
			return appendif.Condition{}, err
		}
		for i, p := range projectors {
			if queries[i].Matches(ev.Type, ev.Tags) {
				p.Apply(ev)
			}
		}
	}
	c, _ := es.Cursor()
	return appendif.FailIf(union, &c), nil
}

// MaxSnapshotNameBytes is the longest snapshot name (Model.WithSnapshots,
// Snapshottable.SnapshotKey) the store accepts.
const MaxSnapshotNameBytes = 256

// ValidateSnapshotName returns an *pgdcb.InvalidArgumentError unless name is a
// valid snapshot name; "" (no snapshots) is valid.
func ValidateSnapshotName(name string) error {
	var reason string
	switch {
	case name == "":
		return nil
	case len(name) > MaxSnapshotNameBytes:
		reason = fmt.Sprintf("longer than %d bytes (%d)", MaxSnapshotNameBytes, len(name))
	case !utf8.ValidString(name):
		reason = "not valid UTF-8"
	case strings.IndexByte(name, 0) >= 0:
		reason = "contains a NUL byte"
	default:
		return nil
	}
	return &pgdcb.InvalidArgumentError{Name: "snapshot name", Reason: clip.Quote(name) + ": " + reason}
}

// validateSnapshotKeys checks the snapshot name of every Snapshottable
// projector.
func ValidateSnapshotKeys(projectors []pgdcb.Projector) error {
	for _, p := range projectors {
		if sp, ok := p.(pgdcb.Snapshottable); ok {
			name, _ := sp.SnapshotKey()
			if err := ValidateSnapshotName(name); err != nil {
				return err
			}
		}
	}
	return nil
}

// Defaults and bounds of Config.
const (
	DefaultMaxBatchSize  = 1000
	DefaultMaxEventBytes = 1 << 20
	DefaultMaxBatchBytes = 16 << 20
	// MaxBytesLimit bounds MaxEventBytes and MaxBatchBytes: 256 MiB, the
	// size at which PostgreSQL refuses a jsonb value (54000) in any case; a
	// batch is held in memory several times over on its way to the server.
	MaxBytesLimit = 256 << 20
)

// Limits are the input limits every store enforces alike (the fields of the
// same names in eventstore.Config and memstore.Config).
type Limits struct{ MaxBatchSize, MaxEventBytes, MaxBatchBytes int }

// ResolveLimits refuses a negative limit or a byte limit above MaxBytesLimit
// (a *pgdcb.InvalidArgumentError naming the Config field) and returns l with
// the defaults filled in.
func ResolveLimits(l Limits) (Limits, error) {
	if err := cfgcheck.NonNegative(
		cfgcheck.Int("MaxBatchSize", l.MaxBatchSize, DefaultMaxBatchSize),
		cfgcheck.Int("MaxEventBytes", l.MaxEventBytes, DefaultMaxEventBytes),
		cfgcheck.Int("MaxBatchBytes", l.MaxBatchBytes, DefaultMaxBatchBytes),
	); err != nil {
		return Limits{}, err
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MaxEventBytes", l.MaxEventBytes}, {"MaxBatchBytes", l.MaxBatchBytes}} {
		if f.v > MaxBytesLimit {
			return Limits{}, &pgdcb.InvalidArgumentError{Name: "Config." + f.name,
				Reason: fmt.Sprintf("must be at most MaxBytesLimit %d (got %d)", MaxBytesLimit, f.v)}
		}
	}
	l.MaxBatchSize = cmp.Or(l.MaxBatchSize, DefaultMaxBatchSize)
	l.MaxEventBytes = cmp.Or(l.MaxEventBytes, DefaultMaxEventBytes)
	l.MaxBatchBytes = cmp.Or(l.MaxBatchBytes, max(DefaultMaxBatchBytes, l.MaxEventBytes))
	return l, nil
}
