// Package faults holds the fault suite: tests that run the store and the
// packages built on it through the failures a production deployment meets,
// against a throwaway PostgreSQL cluster the suite starts itself (package
// internal/pgserver) and crashes, restarts and fills at will. The shared
// server that other tests use is never touched.
//
// Each scenario asserts, and logs a line of figures (attempts, acknowledged,
// unknown outcome, lost, duplicated, partial, recovery time); TestMain prints
// them as a table at the end. What the suite proves, scenario by scenario:
//
//  1. Crash under 8 writers (Append of 1 event, Append of a 100-event batch,
//     AppendIf on distinct boundaries and on one contended counter), with an
//     immediate shutdown and a start: every acknowledged append is present
//     exactly once, no batch is partial, every attempt that failed with a
//     definite error (one that does not match pgdcb.ErrOutcomeUnknown) wrote
//     nothing, an attempt with an unknown outcome is present whole or absent,
//     and the counter's committed values are 1..k without gap or repeat (no
//     lost decision).
//  2. The same writers while their backends are terminated every few
//     milliseconds (pg_terminate_backend): the same checks.
//  3. A projection in a child process SIGKILLed in the middle of a batch,
//     then restarted: the read model holds every event exactly once.
//  4. A subscription across a clean restart and across a crash: every
//     matching event is delivered exactly once, in log order, without gap,
//     including the event appended right after a crash that handed out again
//     a transaction id the store's notification had taken; an AppendIf after
//     a batch's cursor fails when a matching event exists that it never saw.
//  5. The command executor across a crash, commands retried by their caller
//     with the same command id: each command's events are present exactly
//     once, and an infrastructure failure is never reported as a rejection.
//  6. lock_timeout, statement_timeout and a full disk (a tablespace on a
//     small tmpfs): appends fail with a clear, definite error, write
//     nothing, and work again once the lock is released or space is freed.
//  7. 200 goroutines on a pool of 4 connections with 1-8 ms deadlines:
//     acknowledged appends are present once, definite errors wrote nothing,
//     no goroutine or connection leaks.
//  8. Promotion of a standby 500 ms behind that was cut off while 8
//     writers decided with reads on it and the primary went on alone: no
//     committed decision over an event its read did not return (0 blind
//     commits), and projections restarted from their stored checkpoints on
//     the new primary skip and repeat nothing, although the new primary
//     hands out again transaction ids of the lost events.
//
// The package has no code of its own: everything is in its tests, run by
// `make test` like every other package. See docs/FAULTS.md.
package faults
