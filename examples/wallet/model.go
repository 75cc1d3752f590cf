package wallet

import (
	"errors"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/query"
)

// State is a wallet's decision state. Decisions start from a stored snapshot
// of it (eventstore.Model.WithSnapshots, docs/SNAPSHOTS.md), so it must
// survive a JSON round trip: change modelVersion whenever it or the fold
// changes.
type State struct {
	Open    bool  `json:"open"`
	Balance int64 `json:"balance"`
	// Corrupt is the error text of the first event of the wallet that could
	// not be decoded ("" if none): every decision on the wallet then fails
	// with CorruptError.
	Corrupt string `json:"corrupt,omitempty"`
}

// CorruptError returns the error recorded in Corrupt, nil if there is none.
func (s State) CorruptError() error {
	if s.Corrupt == "" {
		return nil
	}
	return errors.New(s.Corrupt)
}

// The decision model's snapshot name and version (see State).
const (
	modelName    = "wallet"
	modelVersion = 1
)

// Model returns the decision model of one wallet, with snapshots.
func Model(id string) *eventstore.Model[State] {
	return eventstore.NewModel(Query(id), State{}, func(s State, ev eventstore.StoredEvent) State {
		if ev.Type == WalletOpened {
			s.Open = true
			return s
		}
		d, err := Delta(ev)
		if err != nil && s.Corrupt == "" {
			s.Corrupt = err.Error()
		}
		s.Balance += d
		return s
	}).WithSnapshots(modelName, modelVersion)
}

// unseen is a Projector that notes, for each cursor of an If-Match
// precondition, whether any event of its query was not seen by that cursor:
// the If-Match check, done in the decision's own read so that nothing can slip
// between the check and the decision.
type unseen struct {
	q       query.Query
	cursors []cursor.Cursor
	changed []bool
}

// newUnseen returns the check of opt's precondition on wallet id, nil if
// there is none.
func newUnseen(id string, opt *Options) *unseen {
	if opt == nil || opt.IfMatch == nil {
		return nil
	}
	cs := opt.IfMatch.Cursors
	return &unseen{q: Query(id), cursors: cs, changed: make([]bool, len(cs))}
}

func (u *unseen) Query() query.Query { return u.q }

func (u *unseen) Apply(ev eventstore.StoredEvent) {
	for i, c := range u.cursors {
		if !u.changed[i] && !c.Seen(ev.TransactionID, ev.Position) {
			u.changed[i] = true
		}
	}
}

// stale reports whether the precondition fails: the wallet changed since
// every cursor (always, with none). A nil check never fails.
func (u *unseen) stale() bool {
	if u == nil {
		return false
	}
	for _, changed := range u.changed {
		if !changed {
			return false
		}
	}
	return true
}
