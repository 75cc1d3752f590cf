package storekit

import (
	"slices"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/internal/eventversion"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// Stamp returns events with the version each was written with recorded in
// its metadata (upcast.MetadataKey), for the types reg has upcasters for
// (version 1 is recorded by its absence) and unless the event records one
// already. events itself is not changed: a copy is made at the first event
// to stamp. Metadata that is not an object cannot record it: a
// *pgdcb.InvalidEventError.
func Stamp(reg *upcast.Registry, events []pgdcb.Event) ([]pgdcb.Event, error) {
	if reg == nil {
		return events, nil
	}
	out := events
	for i, e := range events {
		v := reg.Current(e.Type)
		if v == 1 || eventversion.Has(e.Metadata) {
			continue
		}
		meta, err := eventversion.Set(e.Metadata, v)
		if err != nil {
			return nil, &pgdcb.InvalidEventError{Index: i, Type: e.Type, Field: "metadata", Reason: err.Error()}
		}
		if &out[0] == &events[0] {
			out = slices.Clone(events)
		}
		out[i].Metadata = meta
	}
	return out, nil
}

// Expand returns q with every type of its items widened to all the names
// of that type (upcast.Registry.Names): a query or condition naming a
// renamed type by either name matches the events stored under both.
func Expand(reg *upcast.Registry, q query.Query) query.Query {
	if reg == nil {
		return q
	}
	items := q.Items()
	changed := false
	for i, it := range items {
		var types []string
		for _, t := range it.Types {
			names := reg.Names(t)
			if len(names) > 1 || names[0] != t {
				changed = true
			}
			types = append(types, names...)
		}
		if len(it.Types) > 0 {
			slices.Sort(types)
			items[i].Types = slices.Compact(types)
		}
	}
	if !changed {
		return q
	}
	return query.New(items...)
}

// ExpandCondition is Expand for both queries of a condition.
func ExpandCondition(reg *upcast.Registry, c appendif.Condition) appendif.Condition {
	c.FailIfEventsMatch = Expand(reg, c.FailIfEventsMatch)
	c.Idempotency = Expand(reg, c.Idempotency)
	return c
}
