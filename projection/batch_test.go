package projection_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/logical"
	"github.com/pgdcb/pgdcb/projection"
	"github.com/pgdcb/pgdcb/query"
)

// Step runs the tail; a logical projection refuses it (it would move the
// tail checkpoint under the slot's), and NewBatchRunner refuses logical mode.
func TestStepRefusesLogicalMode(t *testing.T) {
	t.Parallel()
	store, _ := newStore(t)
	r, err := projection.New(store, "logical-step", query.All(),
		func(context.Context, pgx.Tx, []eventstore.StoredEvent) error { return nil },
		&projection.Config{Logical: &logical.Config{}})
	require.NoError(t, err)
	_, err = r.Step(context.Background())
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.Equal(t, 1, strings.Count(err.Error(), "pgdcb:"), err.Error())

	_, err = projection.NewBatchRunner(store, "logical-batch", query.All(), nopBatch{}, &projection.Config{Logical: &logical.Config{}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	require.Equal(t, 1, strings.Count(err.Error(), "pgdcb:"), err.Error())
}

type nopBatch struct{}

func (nopBatch) HandleBatch(context.Context, pgx.Tx, eventstore.TailBatch) error { return nil }
