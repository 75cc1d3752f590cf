package upcast_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/memstore"
	"github.com/pgdcb/pgdcb/query"
	"github.com/pgdcb/pgdcb/upcast"
)

// A type's amount moved from whole euros ("euros") to cents ("cents"), and
// "CardCharged" was renamed "PaymentTaken". Old events stay as written;
// every read hands them out in today's shape.
func Example() {
	ctx := context.Background()
	var reg upcast.Registry
	_ = reg.Rename("CardCharged", "PaymentTaken")
	_ = reg.Register("PaymentTaken", 1, func(data json.RawMessage) (json.RawMessage, error) {
		var v1 struct {
			Euros int64 `json:"euros"`
		}
		if err := json.Unmarshal(data, &v1); err != nil {
			return nil, err
		}
		return json.Marshal(map[string]int64{"cents": v1.Euros * 100})
	})

	store := memstore.MustNew(&memstore.Config{Upcasters: &reg})
	// An event in the old shape, as code before the change wrote it (an
	// append records the current version unless the event records its own,
	// as an import of old events does).
	old := pgdcb.MustEvent("CardCharged", map[string]int{"euros": 3}, "order=1")
	old.Metadata = json.RawMessage(`{"pgdcb_version": 1}`)
	_, _ = store.Append(ctx, []pgdcb.Event{old})
	// Today's code writes today's shape.
	_, _ = store.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("PaymentTaken", map[string]int{"cents": 250}, "order=2")})

	// A query naming either name finds both.
	evs, _, _ := store.ReadAll(ctx, query.Tagged([]string{"CardCharged"}), nil)
	for _, ev := range evs {
		fmt.Println(ev.Type, string(ev.Data))
	}
	// Output:
	// PaymentTaken {"cents":300}
	// PaymentTaken {"cents": 250}
}
