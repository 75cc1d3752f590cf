package effects

import (
	"context"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/internal/errfmt"
	"github.com/pgdcb/pgdcb/tags"
)

// Effect returns the state of one effect, or an error naming id that matches
// ErrNotFound.
func (q *Queue) Effect(ctx context.Context, id string) (Effect, error) {
	if _, err := tags.New(tagID, id); err != nil {
		return Effect{}, invalid("id", err.Error())
	}
	evs, _, err := q.store.ReadAll(ctx, effectQuery(id), nil)
	if err != nil {
		return Effect{}, errfmt.Errorf("pgdcb: effects: effect %q: %w", id, err)
	}
	f := newEffects()
	for _, ev := range evs {
		f.apply(ev)
	}
	e := f.byID[id]
	if e == nil {
		return Effect{}, &notFoundError{ID: id}
	}
	return *e, nil
}

// Pending returns the session's unfinished effects (pending or executing) in
// the order they will run: what a client reconnecting to the session still
// has to expect.
func (q *Queue) Pending(ctx context.Context, session string) ([]Effect, error) {
	if _, err := tags.New(tagSession, session); err != nil {
		return nil, invalid("session", err.Error())
	}
	m := pgdcb.NewModel(sessionQuery(session), newEffects(), foldEffects)
	if _, err := q.store.Project(ctx, m); err != nil {
		return nil, errfmt.Errorf("pgdcb: effects: pending of session %q: %w", session, err)
	}
	var out []Effect
	for _, e := range m.State.session[session] {
		if !e.Finished() {
			out = append(out, *e)
		}
	}
	return out, nil
}

// Counts is the number of effects in each state.
type Counts struct {
	Pending, Executing, Completed, Failed int
}

// Counts counts the effects by state. It folds every effect event of the
// store (retention keeps that bounded; see Purge).
func (q *Queue) Counts(ctx context.Context) (Counts, error) {
	f, err := q.all(ctx)
	if err != nil {
		return Counts{}, errfmt.Errorf("pgdcb: effects: counts: %w", err)
	}
	var c Counts
	for _, e := range f.byID {
		switch e.State {
		case StatePending:
			c.Pending++
		case StateExecuting:
			c.Executing++
		case StateCompleted:
			c.Completed++
		case StateFailed:
			c.Failed++
		}
	}
	return c, nil
}

func (q *Queue) all(ctx context.Context) (*effects, error) {
	f := newEffects()
	for ev, err := range q.store.Read(ctx, allQuery(), nil).All() {
		if err != nil {
			return nil, err
		}
		f.apply(ev)
	}
	return f, nil
}
