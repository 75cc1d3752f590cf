// Command demo runs the wallet reference application end to end (make demo):
// it finds a PostgreSQL (PGDCB_DATABASE_URL, else a throwaway cluster from local
// binaries, else a server running here), opens wallets through the HTTP API,
// runs many concurrent transfers through it, then checks from the log that no
// balance ever went negative (replaying in log order) and that the total money
// is unchanged, and prints the figures.
package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func main() {
	nWallets := flag.Int("wallets", 50, "wallets to open")
	initial := flag.Int64("initial", 1000, "initial deposit per wallet")
	transfers := flag.Int("transfers", 2000, "transfers to attempt")
	clients := flag.Int("clients", 16, "concurrent HTTP clients")
	keep := flag.Bool("keep", false, "keep the demo schema")
	flag.Parse()
	if *nWallets < 2 || *initial < 2 || *transfers < 1 || *clients < 1 {
		log.Fatalf("demo: need -wallets >= 2, -initial >= 2, -transfers >= 1 and -clients >= 1")
	}
	if err := run(*nWallets, *initial, *transfers, *clients, *keep); err != nil {
		log.Fatalf("demo: %v", err)
	}
}

func run(nWallets int, initial int64, nTransfers, clients int, keep bool) error {
	ctx := context.Background()
	srv, err := pgserver.Find(ctx, pgserver.Options{EnvVar: pgserver.EnvVar, PreferThrowaway: true})
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Printf("PostgreSQL: %s\n", srv.Source())

	cfg, err := pgxpool.ParseConfig(srv.DSN())
	if err != nil {
		return err
	}
	cfg.MaxConns = int32(clients + 4)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	var rnd [4]byte
	_, _ = crand.Read(rnd[:])
	schema := "pgdcb_demo_" + hex.EncodeToString(rnd[:])
	if _, err := pgdcbsql.Migrate(ctx, pool, schema); err != nil {
		return err
	}
	if !keep {
		defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	}
	store, err := eventstore.New(pool, &eventstore.Config{Schema: schema})
	if err != nil {
		return err
	}
	svc, err := wallet.New(store, nil)
	if err != nil {
		return err
	}
	balances := wallet.NewBalances(store, nil)
	if err := balances.Setup(ctx); err != nil {
		return err
	}
	rmCtx, stopRM := context.WithCancel(ctx)
	defer stopRM()
	rmDone := make(chan error, 1)
	go func() { rmDone <- balances.Run(rmCtx) }()

	api := httptest.NewServer(wallet.NewAPI(svc, balances))
	defer api.Close()
	hc := api.Client()
	hc.Transport.(*http.Transport).MaxIdleConnsPerHost = clients
	post := func(path string, body any) (int, []byte, error) {
		b, _ := json.Marshal(body)
		resp, err := hc.Post(api.URL+path, "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, raw, err
	}

	fmt.Printf("schema %s, API at %s\n", schema, api.URL)
	ids := make([]string, nWallets)
	for i := range ids {
		ids[i] = fmt.Sprintf("w%03d", i)
		if st, body, err := post("/wallets", map[string]string{"wallet_id": ids[i]}); err != nil || st != 201 {
			return fmt.Errorf("open %s: %d %s %v", ids[i], st, body, err)
		}
		if st, body, err := post("/wallets/"+ids[i]+"/deposits", map[string]int64{"amount": initial}); err != nil || st != 200 {
			return fmt.Errorf("deposit %s: %d %s %v", ids[i], st, body, err)
		}
	}
	fmt.Printf("opened %d wallets with %d each (total %d)\n", nWallets, initial, int64(nWallets)*initial)

	before := svc.Executor().Stats()
	var ok, insufficient, conflict, other atomic.Int64
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(nTransfers) {
				from := rand.IntN(nWallets)
				to := (from + 1 + rand.IntN(nWallets-1)) % nWallets
				t0 := time.Now()
				st, body, err := post("/transfers", wallet.TransferRequest{From: ids[from], To: ids[to], Amount: 1 + rand.Int64N(initial/2)})
				lat[c] = append(lat[c], time.Since(t0))
				var e wallet.ErrorResponse
				_ = json.Unmarshal(body, &e)
				switch {
				case err == nil && st == 200:
					ok.Add(1)
				case st == 409 && e.Code == "insufficient_funds":
					insufficient.Add(1)
				case st == 409 && e.Code == "conflict":
					conflict.Add(1)
				default:
					other.Add(1)
					fmt.Fprintf(os.Stderr, "transfer: %d %s %v\n", st, body, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := svc.Executor().Stats()

	// Let the read model catch up, then stop it.
	stopRM()
	if err := <-rmDone; err != nil {
		return fmt.Errorf("read model: %w", err)
	}
	if last, _, err := store.ReadLast(ctx, query.All()); err != nil {
		return err
	} else if last != nil {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := balances.WaitFor(wctx, last.TransactionID, last.Position)
		cancel()
		if err != nil {
			return err
		}
	}

	// Check the invariants from the log, replayed in log order.
	evs, _, err := store.ReadAll(ctx, query.New(query.Item{Types: wallet.EventTypes}), nil)
	if err != nil {
		return err
	}
	bal := map[string]int64{}
	negatives := 0
	for _, ev := range evs {
		id, _ := ev.Tags.Get(wallet.TagKey)
		d, err := wallet.Delta(ev)
		if err != nil {
			return err
		}
		bal[id] += d
		if bal[id] < 0 {
			negatives++
			fmt.Fprintf(os.Stderr, "NEGATIVE: wallet %s at %d after event %d\n", id, bal[id], ev.Position)
		}
	}
	var total int64
	mismatches := 0
	for _, id := range ids {
		total += bal[id]
		v, err := svc.Wallet(ctx, id)
		if err != nil {
			return err
		}
		rm, _, err := balances.Balance(ctx, id)
		if err != nil {
			return err
		}
		if v.Balance != bal[id] || rm != bal[id] {
			mismatches++
			fmt.Fprintf(os.Stderr, "MISMATCH: %s replay=%d decision=%d readmodel=%d\n", id, bal[id], v.Balance, rm)
		}
	}

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) time.Duration {
		if len(all) == 0 {
			return 0
		}
		return all[int(p*float64(len(all)-1))]
	}
	conflicts := after.Conflicts - before.Conflicts
	retries := after.Retries - before.Retries
	fmt.Printf("\n%d transfers by %d concurrent HTTP clients over %d wallets in %v\n", nTransfers, clients, nWallets, elapsed.Round(time.Millisecond))
	fmt.Printf("  committed            %d\n", ok.Load())
	fmt.Printf("  insufficient funds   %d (rejected, nothing appended)\n", insufficient.Load())
	fmt.Printf("  retries exhausted    %d\n", conflict.Load())
	fmt.Printf("  other errors         %d\n", other.Load())
	fmt.Printf("  commands/s           %.0f\n", float64(nTransfers)/elapsed.Seconds())
	fmt.Printf("  conflicts            %d (%.1f%% of commands), retries %d\n", conflicts, 100*float64(conflicts)/float64(nTransfers), retries)
	fmt.Printf("  latency p50 %v  p99 %v\n", pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	fmt.Printf("\nchecks from the log (%d events replayed in log order):\n", len(evs))
	fmt.Printf("  no balance ever negative:  %v\n", negatives == 0)
	fmt.Printf("  total money unchanged:     %v (%d)\n", total == int64(nWallets)*initial, total)
	fmt.Printf("  decision model and read model equal the replay: %v\n", mismatches == 0)
	if negatives != 0 || total != int64(nWallets)*initial || mismatches != 0 || other.Load() != 0 {
		return fmt.Errorf("invariant violated")
	}
	fmt.Println("OK")
	return nil
}
