package eventstore

import (
	"context"
	"time"
)

// Notify wakes tailing readers (subscriptions, projections, the outbox) that
// LISTEN on NotifyChannel(schema). Append and AppendIf call it after they
// commit; call it yourself after committing a transaction that used AppendTx or
// AppendIfTx. It never blocks: notifications are sent from a background
// goroutine, one at a time, and calls that arrive while one is being sent are
// coalesced into the next. Without notifications readers still see every event
// at their next poll. Does nothing when Config.NotifyDisabled is set.
//
// The NOTIFY is sent only when a listener is registered (ListenerLockKey:
// Store.Listen and ListenConn register): the statement that would send it
// first tries the registration lock in exclusive mode, which succeeds only
// when no session holds it; then it sends nothing, assigns no transaction
// id and writes no commit record, so an append nobody listens for costs one
// transaction. The check runs after the append committed, and a listener
// registers before it LISTENs and then reads, so a listener either is seen
// by the check or reads the appended events itself. A store that found no
// listener sends nothing at all (no statement) for ListenerCheckInterval
// from when it began that check; listeners read again ListenerSettle after
// registering, which covers the appends of that window.
//
// The NOTIFY is not sent inside the appending transaction: a notifying
// transaction holds a database-wide lock until its commit is flushed, which
// serialises every appending writer.
func (s *Store) Notify(ctx context.Context) {
	if s.cfg.NotifyDisabled || s.noListenerRecently() {
		return // nothing to send, not even the check (no goroutine either)
	}
	s.notifyPending.Store(true)
	if !s.notifyRunning.CompareAndSwap(false, true) {
		return // the running sender will see the pending flag
	}
	// The append's context may end as soon as it returns; the notification
	// belongs to the committed events, not to the call (bgWork.run drops its
	// cancellation). Close waits for it; once the store is closed nothing is
	// sent.
	started := s.bg.run(ctx, false, func(bg context.Context) {
		for {
			for s.notifyPending.Swap(false) {
				if s.noListenerRecently() {
					continue // nobody listened a moment ago (ListenerSettle)
				}
				began := s.sinceBorn() // before the check: the window starts no later than it
				nctx, cancel := context.WithTimeout(bg, 5*time.Second)
				tag, err := s.pool.Exec(nctx, notifySQL, s.channel, s.listenK1, s.listenK2)
				switch {
				case err != nil:
					s.cfg.Logger.WarnContext(nctx, "pgdcb: notify failed; readers will poll", "err", err)
				case tag.RowsAffected() == 0: // no listener: nothing sent
					s.noListenerAt.Store(int64(max(began, 1)))
				default:
					s.noListenerAt.Store(0)
				}
				cancel()
			}
			s.notifyRunning.Store(false)
			// A Notify between the loop's last check and the store above found
			// the sender running and left; take over if so.
			if !s.notifyPending.Load() || !s.notifyRunning.CompareAndSwap(false, true) {
				return
			}
		}
	})
	if !started {
		s.notifyRunning.Store(false)
	}
}

// notifySQL sends the notification, when a listener is registered, in a
// transaction of its own whose commit does not wait for its WAL flush
// (set_config's third argument: for this transaction only). A NOTIFY assigns
// its transaction an id and so writes a commit record; waiting for that
// record's flush bought nothing (a notification is a wake-up hint, lost in a
// crash either way) and held the database-wide notify lock across an fsync,
// which every other notifier then waited for.
//
// The WHERE clause is the listener check: pg_try_advisory_xact_lock on
// ListenerLockKey in exclusive mode gets it (and releases it at the end of
// this one-statement transaction) only when no listener holds it shared;
// then the SELECT list is not evaluated: no pg_notify, no transaction id.
// Two notifiers checking at once may both fail to get it and notify: one
// notification too many, never one too few.
const notifySQL = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '') WHERE NOT pg_try_advisory_xact_lock($2, $3)"

// sinceBorn is the store's monotonic clock.
func (s *Store) sinceBorn() time.Duration { return time.Since(s.born) }

// noListenerRecently reports whether a listener check that began less than
// ListenerCheckInterval ago found no listener.
func (s *Store) noListenerRecently() bool {
	at := s.noListenerAt.Load()
	return at != 0 && s.sinceBorn()-time.Duration(at) < listenerCheckInterval
}
