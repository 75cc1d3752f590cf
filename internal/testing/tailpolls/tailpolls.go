// Package tailpolls counts the tailing reads of a reader under test, so that
// a test can wait for "n more polls" as a signal instead of sleeping for n
// poll intervals. On a loaded machine a sleep of n intervals may cover no
// poll at all, and a check that "nothing more came" after it proves nothing;
// counting the reads makes the check mean what it says.
//
// Wrap the store a subscription (or any reader taking an
// pgdcb.Store) reads from:
//
//	polls := tailpolls.New(store)
//	sub, _ := subscription.New(polls, q, cfg)
//	…
//	polls.Await(t, 3, time.Minute) // three whole polls since this call
package tailpolls

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/query"
)

// Store is a pgdcb.Store that counts the ReadTail calls made
// through it; every other method is the wrapped store's.
type Store struct {
	pgdcb.Store
	mu      sync.Mutex
	started int
	moved   chan struct{} // closed and dropped at every read started
}

// New wraps s.
func New(s pgdcb.Store) *Store { return &Store{Store: s} }

// ReadTail counts the read, then reads through the wrapped store.
func (p *Store) ReadTail(ctx context.Context, q query.Query, after cursor.Cursor, limit int) (pgdcb.TailBatch, error) {
	p.mu.Lock()
	p.started++
	if p.moved != nil {
		close(p.moved)
		p.moved = nil
	}
	p.mu.Unlock()
	return p.Store.ReadTail(ctx, q, after, limit)
}

// Started returns how many tailing reads have started.
func (p *Store) Started() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.started
}

// Await returns once n whole polls have been made since the call: a reader
// loops read, hand over, wait, so n+1 more reads started mean that n reads
// were made and handed over (a read already running when Await is called
// is not counted). It fails tb when that takes longer than timeout; the
// timeout only bounds how long a failure takes to show.
func (p *Store) Await(tb testing.TB, n int, timeout time.Duration) {
	tb.Helper()
	p.mu.Lock()
	target := p.started + n + 1
	p.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		if p.started >= target {
			p.mu.Unlock()
			return
		}
		if p.moved == nil {
			p.moved = make(chan struct{})
		}
		moved := p.moved
		p.mu.Unlock()
		select {
		case <-moved:
		case <-deadline.C:
			tb.Fatalf("tailpolls: the reader did not make %d more polls within %s", n, timeout)
		}
	}
}
