package effects

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/tags"
)

// Queue requests effects and answers queries about them. It is safe for
// concurrent use.
type Queue struct {
	store *eventstore.Store
	cfg   Config
}

// New returns a Queue over the store (whose schema must be migrated).
func New(store *eventstore.Store, cfg *Config) (*Queue, error) {
	if store == nil {
		return nil, invalid("store", "must not be nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("effects.New: %w", err)
	}
	return &Queue{store: store, cfg: cfg.withDefaults()}, nil
}

// Request asks for an effect.
type Request struct {
	// Type selects the handler. Required.
	Type string
	// Session orders effects: those of one session run one after another, in
	// request order. Required; a tag value (1..256 bytes of UTF-8, no NUL).
	Session string
	// DedupeKey identifies the effect: a second request with the same key
	// creates nothing. Required; a tag value, for example a SHA-256 in hex of
	// what makes the effect unique.
	DedupeKey string
	// Payload is the handler's input, JSON; nil means null.
	Payload json.RawMessage
}

func (r Request) validate() error {
	if r.Type == "" {
		return invalid("Request.Type", "must not be empty")
	}
	if _, err := tags.New(tagSession, r.Session); err != nil {
		return invalid("Request.Session", err.Error())
	}
	if _, err := tags.New(tagDedupe, r.DedupeKey); err != nil {
		return invalid("Request.DedupeKey", err.Error())
	}
	if r.Payload != nil && !json.Valid(r.Payload) {
		return invalid("Request.Payload", "not valid JSON")
	}
	return nil
}

func dedupeQuery(key string) query.Query {
	return query.New(query.Item{Types: []string{typeRequested}, Tags: mustSet(tags.Must(tagDedupe, key))})
}

// Request records an effect unless one with the same DedupeKey exists. It
// returns the effect's id and whether this call created it: a duplicate
// returns the existing effect's id, created false, and appends nothing.
// An error matching pgdcb.ErrOutcomeUnknown is retried inside (the
// idempotency query makes it safe) until ctx ends.
func (q *Queue) Request(ctx context.Context, r Request) (id string, created bool, err error) {
	if err := r.validate(); err != nil {
		return "", false, err
	}
	payload := r.Payload
	if payload == nil {
		payload = json.RawMessage("null")
	}
	id = uuid.NewString()
	data, err := json.Marshal(requestedData{Type: r.Type, Payload: payload, DedupeKey: r.DedupeKey, Session: r.Session})
	if err != nil {
		return "", false, invalid("Request.Payload", err.Error())
	}
	ev := pgdcb.Event{Type: typeRequested, Data: data,
		Tags: mustSet(idTag(id), sessionTag(r.Session), tags.Must(tagDedupe, r.DedupeKey))}
	dq := dedupeQuery(r.DedupeKey)
	cond := appendif.Condition{Idempotency: dq}
	for {
		_, err = q.store.AppendIf(ctx, []pgdcb.Event{ev}, cond)
		switch {
		case err == nil:
			return id, true, nil
		case errors.Is(err, pgdcb.ErrIdempotent):
			existing, _, rerr := q.store.ReadLast(ctx, dq)
			if rerr != nil {
				return "", false, errfmt.Errorf("pgdcb: effects: request %q: reading the existing effect: %w", r.DedupeKey, rerr)
			}
			if existing == nil { // removed by retention meanwhile
				continue
			}
			// Our own earlier attempt (an unknown outcome) counts as created.
			eid := tagValue(*existing, tagID)
			return eid, eid == id, nil
		case errors.Is(err, pgdcb.ErrOutcomeUnknown) && ctx.Err() == nil:
			q.cfg.Logger.WarnContext(ctx, "effects: request outcome unknown, retrying", "dedupe_key", r.DedupeKey, "err", err)
			continue
		default:
			return "", false, errfmt.Errorf("pgdcb: effects: request %q: %w", r.DedupeKey, err)
		}
	}
}
