package faq

import (
	"context"
	"errors"
	"strings"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

var ErrUsernameTaken = errors.New("username taken")

// Register claims a username for an account unless another account holds it.
// The boundary is the name's tag: registrations of other names never contend.
func Register(ctx context.Context, store pgdcb.Store, account, username string) error {
	name := "username=" + strings.ToLower(strings.TrimSpace(username)) // the tag is the uniqueness key
	taken := pgdcb.NewModel(query.Tagged(nil, name), false,
		func(_ bool, ev pgdcb.StoredEvent) bool { return ev.Type != "UsernameReleased" })
	cond, err := store.Project(ctx, taken)
	if err != nil {
		return err
	}
	if taken.State {
		return ErrUsernameTaken
	}
	_, err = store.AppendIf(ctx, []pgdcb.Event{
		pgdcb.MustEvent("AccountRegistered", map[string]string{}, "account="+account, name),
	}, cond)
	if errors.Is(err, pgdcb.ErrConditionFailed) {
		return ErrUsernameTaken // it was free when we read; someone claimed or changed it since: decide again or refuse
	}
	return err
}
