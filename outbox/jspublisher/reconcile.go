package jspublisher

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/internal/relayterm"
	"github.com/pgdcb/pgdcb/outbox"
)

// logKey is an event's place in log order.
type logKey struct {
	tx  uint64
	pos int64
}

func keyOf(ev pgdcb.StoredEvent) logKey { return logKey{ev.TransactionID, ev.Position} }

func (a logKey) less(b logKey) bool {
	return a.tx < b.tx || (a.tx == b.tx && a.pos < b.pos)
}

// reconciler knows, per subject, the newest message of the relay's topic the
// stream holds, so that a batch delivered again drops what the stream
// already has, however long ago it was stored (the Duplicates window only
// covers recent ones). A relay publishes in log order, so the messages a
// batch may find in the stream are those up to the subject's last one; each
// is skipped only if it is seen there (pipelining can leave a refused
// message between stored ones).
//
// Knowledge of a subject comes from the stream (its last message) or from
// this publisher's own acks. It is dropped after a failed attempt, a
// reconnect, a new leadership term of a relay, and whenever a batch starts at
// or before it (a rewind or a redelivery): then the stream is asked again.
type reconciler struct {
	js      jetstream.JetStream
	log     *slog.Logger
	timeout time.Duration // bounds each request to the stream

	mu      sync.Mutex
	known   map[string]logKey           // subject → newest held message of ours
	streams map[string]jetstream.Stream // subject → stream capturing it
	terms   map[string]uint64           // topic → the relay term last seen
	// reconnects is the connection's reconnect count at the last batch.
	reconnects uint64
}

func (r *reconciler) init(js jetstream.JetStream, log *slog.Logger, timeout time.Duration) {
	r.js, r.log, r.timeout = js, log, timeout
	r.known = map[string]logKey{}
	r.streams = map[string]jetstream.Stream{}
	r.terms = map[string]uint64{}
}

// invalidate forgets what the stream holds: the next batch asks it again.
func (r *reconciler) invalidate() {
	r.mu.Lock()
	clear(r.known)
	r.mu.Unlock()
}

// observeTerm invalidates when the batch comes from a relay term not seen
// before: another process may have published meanwhile.
func (r *reconciler) observeTerm(ctx context.Context, msgs []outbox.Message) {
	t, ok := relayterm.Of(ctx)
	if !ok || len(msgs) == 0 {
		return
	}
	topic := msgs[0].Topic
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.terms[topic] != t {
		r.terms[topic] = t
		clear(r.known)
	}
}

// observeReconnects invalidates when the connection reconnected since the
// last batch (n is its reconnect count): the broker may have restarted.
func (r *reconciler) observeReconnects(n uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n != r.reconnects {
		r.reconnects = n
		clear(r.known)
	}
}

// acked records that the stream holds o.
func (r *reconciler) acked(o outMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if k, ok := r.known[o.nm.Subject]; !ok || k.less(o.key) {
		r.known[o.nm.Subject] = o.key
	}
}

// skipHeld returns the messages of batch that the stream does not hold yet.
func (r *reconciler) skipHeld(ctx context.Context, batch []outMsg) ([]outMsg, error) {
	if len(batch) == 0 {
		return batch, nil
	}
	// The first message of each subject decides whether to ask the stream:
	// a batch that starts past what the stream is known to hold has nothing
	// it holds.
	bySubject := map[string][]outMsg{}
	var ask []string
	r.mu.Lock()
	for _, o := range batch {
		s := o.nm.Subject
		if _, seen := bySubject[s]; !seen {
			if k, ok := r.known[s]; !ok || !k.less(o.key) {
				ask = append(ask, s)
			}
		}
		bySubject[s] = append(bySubject[s], o)
	}
	r.mu.Unlock()
	held := map[logKey]bool{}
	for _, s := range ask {
		last, err := r.held(ctx, s, bySubject[s], held)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		r.known[s] = last
		r.mu.Unlock()
	}
	if len(held) == 0 {
		return batch, nil
	}
	rest := make([]outMsg, 0, len(batch)-len(held))
	for _, o := range batch {
		if !held[o.key] {
			rest = append(rest, o)
		}
	}
	r.log.DebugContext(ctx, "pgdcb: jspublisher: reconciled with the stream: skipping messages it holds",
		"skipped", len(batch)-len(rest), "first", batch[0].m.ID)
	return rest, nil
}

// held finds which of msgs (one subject's messages of a batch, in log order)
// the stream holds, and adds them to found. It reads the subject's last
// message, which must be one of the topic's (else nothing is held, as far as
// reconciliation can tell), then walks back through the stream from it
// until it has seen every message of msgs at or before it, or one before
// msgs[0]: a message is skipped only if it was seen in the stream, so a
// message refused between stored ones (pipelining) is never skipped. It
// returns the last message's place in the log (the zero key when none).
func (r *reconciler) held(ctx context.Context, subject string, msgs []outMsg, found map[logKey]bool) (logKey, error) {
	st, err := r.stream(ctx, subject)
	if err != nil {
		return logKey{}, err
	}
	var raw *jetstream.RawStreamMsg
	err = r.request(ctx, func(ctx context.Context) (err error) {
		raw, err = st.GetLastMsgForSubject(ctx, subject)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return logKey{}, nil
	}
	if err != nil {
		r.mu.Lock()
		delete(r.streams, subject) // the stream may have been recreated
		r.mu.Unlock()
		return logKey{}, errfmt.Errorf("pgdcb: jspublisher: reading the last message of subject %q: %w", subject, err)
	}
	last, ours := keyOfRaw(raw, msgs[0].m)
	if !ours {
		r.log.DebugContext(ctx, "pgdcb: jspublisher: the last message of the subject is not of this topic: not reconciled",
			"subject", subject, "msg_id", raw.Header.Get(jetstream.MsgIDHeader))
		return logKey{}, nil
	}
	want := map[logKey]bool{}
	for _, o := range msgs {
		if !last.less(o.key) {
			want[o.key] = true
		}
	}
	var n int
	see := func(k logKey) {
		if want[k] && !found[k] {
			found[k] = true
			n++
		}
	}
	see(last)
	// Bounded: a stream shared with other subjects may hold many messages
	// between ours; past the bound, what was not seen is sent again (and
	// dropped by the Duplicates window if it is still open).
	limit := 4*len(msgs) + 256
	for seq := raw.Sequence - 1; seq > 0 && n < len(want) && limit > 0; seq, limit = seq-1, limit-1 {
		var m *jetstream.RawStreamMsg
		err := r.request(ctx, func(ctx context.Context) (err error) {
			m, err = st.GetMsg(ctx, seq)
			return err
		})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted
		}
		if err != nil {
			return logKey{}, errfmt.Errorf("pgdcb: jspublisher: reading message %d of the stream of subject %q: %w", seq, subject, err)
		}
		if m.Subject != subject {
			continue
		}
		k, ours := keyOfRaw(m, msgs[0].m)
		if !ours {
			continue
		}
		if k.less(msgs[0].key) {
			break
		}
		see(k)
	}
	return last, nil
}

// keyOfRaw returns the place in the log of a stream message, and whether it
// is a message of like's topic and store.
func keyOfRaw(raw *jetstream.RawStreamMsg, like outbox.Message) (logKey, bool) {
	h := raw.Header
	if h.Get(HeaderTopic) != like.Topic || idPrefix(h.Get(jetstream.MsgIDHeader)) != idPrefix(like.ID) {
		return logKey{}, false
	}
	tx, err1 := strconv.ParseUint(h.Get(HeaderTransactionID), 10, 64)
	pos, err2 := strconv.ParseInt(h.Get(HeaderPosition), 10, 64)
	if err1 != nil || err2 != nil {
		return logKey{}, false
	}
	return logKey{tx, pos}, true
}

// idPrefix is "<schema>-" of an id "<schema>-<position>".
func idPrefix(id string) string { return id[:strings.LastIndexByte(id, '-')+1] }

func (r *reconciler) stream(ctx context.Context, subject string) (jetstream.Stream, error) {
	r.mu.Lock()
	st, ok := r.streams[subject]
	r.mu.Unlock()
	if ok {
		return st, nil
	}
	var name string
	err := r.request(ctx, func(ctx context.Context) (err error) {
		name, err = r.js.StreamNameBySubject(ctx, subject)
		return err
	})
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: jspublisher: finding the stream of subject %q: %w", subject, err)
	}
	err = r.request(ctx, func(ctx context.Context) (err error) {
		st, err = r.js.Stream(ctx, name)
		return err
	})
	if err != nil {
		return nil, errfmt.Errorf("pgdcb: jspublisher: opening stream %q: %w", name, err)
	}
	r.mu.Lock()
	r.streams[subject] = st
	r.mu.Unlock()
	return st, nil
}

// request runs one request to the stream, bounded by the timeout (an error
// of errAckTimeout's when it ran out).
func (r *reconciler) request(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeoutCause(ctx, r.timeout, errAckTimeout)
	defer cancel()
	if err := f(ctx); err != nil {
		return withCause(ctx, err)
	}
	return nil
}
