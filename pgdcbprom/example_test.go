package pgdcbprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/pgdcbprom"
)

func ExampleNew() {
	metrics := pgdcbprom.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	// store, err := eventstore.New(pool, &eventstore.Config{Tracer: metrics})
	// metrics.WatchStore(store)
	// Here, what the store reports when an append of two events commits:
	metrics.TraceAppendEnd(context.Background(), eventstore.TraceAppendEndData{
		Outcome: eventstore.OutcomeCommitted, Events: 2, Duration: time.Millisecond})

	families, _ := registry.Gather()
	for _, f := range families {
		fmt.Println(f.GetName())
	}
	// Output:
	// pgdcb_store_append_check_items_total
	// pgdcb_store_append_conflicts_total
	// pgdcb_store_append_duration_seconds
	// pgdcb_store_append_group_size
	// pgdcb_store_append_idempotent_total
	// pgdcb_store_appends_grouped_total
	// pgdcb_store_events_appended_total
}

// The same Metrics serves every component: here the command executor's.
func ExampleMetrics() {
	metrics := pgdcbprom.New()
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	// exec, err := commands.New(store, &commands.Config{Tracer: metrics})
	// Here, what the executor reports when a command commits at its second
	// decision:
	metrics.TraceExecuteEnd(context.Background(), commands.TraceExecuteData{
		Type: "Deposit", Result: commands.ResultExecuted, Attempts: 2, Retries: 1, Duration: time.Millisecond})

	families, _ := registry.Gather()
	for _, f := range families {
		fmt.Println(f.GetName())
	}
	// Output:
	// pgdcb_commands_attempts
	// pgdcb_commands_duration_seconds
	// pgdcb_commands_executed_total
	// pgdcb_commands_retried_total
}
