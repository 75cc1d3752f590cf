// Package pgdcbtest is the testing kit for code built on pgdcb: a store on a
// fresh, migrated schema per test, and the helpers tests reach for (read the
// whole log, assert on events by type and tags, wait until a projection or
// a subscription has caught up).
//
//	func TestDeposit(t *testing.T) {
//		t.Parallel()
//		store := pgdcbtest.NewStore(t, nil) // a schema of its own, dropped after the test
//		…
//		pgdcbtest.RequireEvents(t, pgdcbtest.ReadAll(t, store),
//			pgdcb.MustEvent("MoneyDeposited", map[string]int{"amount": 10}, "wallet=a"))
//	}
//
// The server is found the way pgdcb's own tests find one (docs/TESTING.md):
// the PGDCB_TEST_DATABASE_URL environment variable, else a server on
// 127.0.0.1:5432, else a throwaway cluster started from local PostgreSQL
// binaries, else a container when a Docker engine answers and the test
// binary imports package pgdcbtest/docker, a module of its own
// (testcontainers-go and its fifty modules stay out of your go.mod until
// you require it):
//
//	import _ "github.com/pgdcb/pgdcb/pgdcbtest/docker"
//
// A test fails (never skips) when there is none.
//
// Migrating a schema takes server time, so NewStore does not do it while the test waits: a background worker of the
// test binary migrates schemas ahead (under their final names: the schema's
// functions embed its name) and NewStore hands one out. Every schema it
// makes is dropped in the background when its test ends; schemas left
// behind by a binary that exited first (the spares it had made ahead, drops
// still pending, a killed test) are dropped by the next test binary that
// uses the package, since each binary holds a session advisory lock while
// it runs and a schema whose binary's lock is free is known to be orphaned.
//
// Package commands/commandstest builds given-when-then fixtures for command
// handlers on top of this package and the in-memory store.
package pgdcbtest
