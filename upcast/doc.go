// Package upcast brings events written in an older shape to the shape the
// code reads today, as they are read: a Registry of upcasters, each a pure
// function over an event type's JSON data from one version to the next,
// chained, and of renamed types.
//
// Give the registry to the store (eventstore.Config.Upcasters,
// memstore.Config.Upcasters). An append then records the version each event
// was written with under the metadata key MetadataKey (only for types with
// upcasters: version 1 is recorded by its absence), and every read path
// hands out the current shape: Read, ReadAll, ReadLast, Project and its
// decision snapshots, ReadTail, subscriptions, projections (tailing and
// logical), the outbox, effects and commands. Old events stay in the log
// exactly as they were written. docs/LIFECYCLE.md, "Evolving events", says
// how to evolve a type and what the guarantees are.
package upcast
