package outbox

import (
	"context"
	"sync"
	"time"

	"github.com/pgdcb/pgdcb/projection"
)

// Status is a relay's delivery state: its checkpoint row (shared by every
// process running the relay) and what this process saw of the broker while
// it led.
type Status struct {
	projection.Status
	// LastAckAt is when the broker last acknowledged a whole batch of this
	// process's relay; zero if never since the process started.
	LastAckAt time.Time
	// InFlightSince is since when messages have been waiting for the
	// broker's ack: the start of the first attempt to publish the oldest
	// message not acknowledged yet (failed attempts and their retries keep
	// it). Zero while nothing waits, and while this process does not lead.
	InFlightSince time.Time
	// Stalled: InFlightSince is Config.StallAfter or more ago. An operator
	// alerts on it: the broker is down, refuses the messages, or does not
	// answer, and nothing gets delivered.
	Stalled bool
}

// delivery is a relay's in-process view of its publishes.
type delivery struct {
	stallAfter time.Duration

	mu            sync.Mutex
	lastAck       time.Time
	inFlightSince time.Time
}

// begin notes a publish attempt starting at now.
func (d *delivery) begin(now time.Time) {
	d.mu.Lock()
	if d.inFlightSince.IsZero() {
		d.inFlightSince = now
	}
	d.mu.Unlock()
}

// acked notes that every message handed over so far was acknowledged at now.
func (d *delivery) acked(now time.Time) {
	d.mu.Lock()
	d.lastAck = now
	d.inFlightSince = time.Time{}
	d.mu.Unlock()
}

// idle forgets the publish in flight: this process stopped leading.
func (d *delivery) idle() {
	d.mu.Lock()
	d.inFlightSince = time.Time{}
	d.mu.Unlock()
}

// snapshot returns the last ack, the in-flight start and whether the relay is
// stalled at now; nothing is in flight unless leading.
func (d *delivery) snapshot(now time.Time, leading bool) (lastAck, inFlightSince time.Time, stalled bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !leading {
		return d.lastAck, time.Time{}, false
	}
	stalled = !d.inFlightSince.IsZero() && now.Sub(d.inFlightSince) >= d.stallAfter
	return d.lastAck, d.inFlightSince, stalled
}

// Status reads the checkpoint (state, cursor, consecutive failed attempts,
// last error, leader, heartbeat) and adds this process's view of the broker:
// last ack, publish in flight, stalled.
func (r *Relay) Status(ctx context.Context) (Status, error) {
	ps, err := r.runner.Status(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Status: ps}
	st.LastAckAt, st.InFlightSince, st.Stalled = r.delivery.snapshot(time.Now(), r.runner.IsLeader())
	return st, nil
}
