package faq

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/pgdcb/pgdcb"
	appendif "github.com/pgdcb/pgdcb/append"
	"github.com/pgdcb/pgdcb/query"
)

// CreateInvoice appends the next invoice number: consecutive, no gap, no
// duplicate. The decision reads only the last InvoiceCreated event, and the
// condition (every InvoiceCreated after that read) makes concurrent creators
// take turns: the loser of a race reads again and takes the next number.
func CreateInvoice(ctx context.Context, store pgdcb.Store, customer string) (int, error) {
	invoices := query.Tagged([]string{"InvoiceCreated"})
	for {
		last, cur, err := store.ReadLast(ctx, invoices) // one event, however many invoices exist
		if err != nil {
			return 0, err
		}
		next := 1
		if last != nil {
			var d struct{ Number int }
			if err := json.Unmarshal(last.Data, &d); err != nil {
				return 0, err
			}
			next = d.Number + 1
		}
		ev := pgdcb.MustEvent("InvoiceCreated", map[string]any{"number": next, "customer": customer},
			"invoice="+strconv.Itoa(next), "customer="+customer)
		_, err = store.AppendIf(ctx, []pgdcb.Event{ev}, appendif.FailIf(invoices, &cur))
		if errors.Is(err, pgdcb.ErrConditionFailed) {
			continue // another invoice was created meanwhile: take the next number
		}
		if err != nil {
			return 0, err
		}
		return next, nil
	}
}
