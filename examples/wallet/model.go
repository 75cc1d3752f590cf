package wallet

import (
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// State is a wallet's decision state.
type State struct {
	Open    bool
	Balance int64
	// Err is set if an event could not be decoded.
	Err error
}

// Model returns the decision model of one wallet.
func Model(id string) *eventstore.Model[State] {
	return eventstore.NewModel(Query(id), State{}, func(s State, ev eventstore.StoredEvent) State {
		if ev.Type == WalletOpened {
			s.Open = true
			return s
		}
		d, err := Delta(ev)
		if err != nil && s.Err == nil {
			s.Err = err
		}
		s.Balance += d
		return s
	})
}

// unseen is a Projector that notes whether any event of its query was not seen
// by a client's cursor: the If-Match check, done in the decision's own read so
// that nothing can slip between the check and the decision.
type unseen struct {
	q     query.Query
	after cursor.Cursor
	stale bool
}

func (u *unseen) Query() query.Query { return u.q }

func (u *unseen) Apply(ev eventstore.StoredEvent) {
	if !u.after.Seen(ev.TransactionID, ev.Position) {
		u.stale = true
	}
}
