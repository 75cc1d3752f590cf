package eventstore_test

// Sealed fields against plain ones, in the same run on the same server:
//
//	go test ./eventstore -run '^$' -bench 'Sealed' -benchtime 2s -count 3
//
// append: one Append of one event with a 2-field payload, plain or with its
// name field marked pgdcb.Personal (sealed: the subject lock and key read,
// the AES-GCM seal, no group commit). read: ReadAll of 100 such events of
// one subject (one key look-up per batch, 100 opens). Compare ns/op of
// plain and sealed for the ratio.

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/query"
)

func BenchmarkSealed(b *testing.B) {
	ctx := context.Background()
	s, _ := erasableStore(b, nil)
	payload := func(sealed bool, i int) map[string]any {
		name := any(fmt.Sprintf("Ada Lovelace %d", i))
		if sealed {
			name = pgdcb.Personal("u1", name)
		}
		return map[string]any{"name": name, "amount": i}
	}
	for _, kind := range []string{"plain", "sealed"} {
		sealed := kind == "sealed"
		tag := "kind=" + kind
		b.Run("append/"+kind, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Named", payload(sealed, i), tag, "bench=append")})
				require.NoError(b, err)
			}
		})
		rtag := "read=" + kind
		evs := make([]pgdcb.Event, 100)
		for i := range evs {
			evs[i] = pgdcb.MustEvent("Named", payload(sealed, i), rtag)
		}
		_, err := s.Append(ctx, evs)
		require.NoError(b, err)
		q := query.Tagged(nil, rtag)
		b.Run("read100/"+kind, func(b *testing.B) {
			for b.Loop() {
				got, _, err := s.ReadAll(ctx, q, nil)
				require.NoError(b, err)
				require.Len(b, got, 100)
			}
		})
	}
}
