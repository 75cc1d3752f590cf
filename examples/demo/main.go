// Command demo runs the wallet reference application end to end (make demo):
// it finds a PostgreSQL (PGDCB_DATABASE_URL, else a throwaway cluster from local
// binaries, else a server running here), opens wallets through the HTTP API,
// runs many concurrent transfers through it, then checks from the log that no
// balance ever went negative (replaying in log order) and that the total money
// is unchanged, and prints the figures.
//
// Long runs: every -interval it prints the transfers done, the rate over the
// interval and since the start, and the conflicts; at the end it prints the
// rate of each minute and the last minute's rate against the first's (a soak:
// -wallets 200 -transfers 60000 -clients 64). -snapshots=false decides from
// the whole history of each wallet, for comparison (docs/SNAPSHOTS.md).
//
// Decisions start from snapshots written every -snapshot-every events past a
// wallet's last one (default 20, so that the default run, about 70 events a
// wallet, shows them; the store's own default, 100, suits longer histories).
// The summary prints what was loaded and written, and why nothing was when
// nothing was.
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

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

func main() {
	nWallets := flag.Int("wallets", defaultWallets, "wallets to open")
	initial := flag.Int64("initial", 1000, "initial deposit per wallet")
	transfers := flag.Int("transfers", defaultTransfers, "transfers to attempt")
	clients := flag.Int("clients", 16, "concurrent HTTP clients")
	keep := flag.Bool("keep", false, "keep the demo schema")
	interval := flag.Duration("interval", 5*time.Second, "print progress every interval (0: never)")
	snapshots := flag.Bool("snapshots", true, "decide from decision snapshots (false: fold each wallet's whole history)")
	snapshotEvery := flag.Int("snapshot-every", defaultSnapshotEvery, "write a wallet's snapshot once a decision folds this many events past its last one")
	readDSN := flag.String("read-dsn", "", "a streaming hot standby of the database to send the store's reads (decisions too) to; appends stay on the primary (docs/REPLICAS.md)")
	flag.Parse()
	if *nWallets < 2 || *initial < 2 || *transfers < 1 || *clients < 1 || *interval < 0 || *snapshotEvery < 1 {
		log.Fatalf("demo: need -wallets >= 2, -initial >= 2, -transfers >= 1, -clients >= 1, -interval >= 0 and -snapshot-every >= 1")
	}
	o := options{nWallets: *nWallets, initial: *initial, nTransfers: *transfers, clients: *clients,
		keep: *keep, interval: *interval, snapshots: *snapshots, snapshotEvery: *snapshotEvery, readDSN: *readDSN}
	if err := run(o); err != nil {
		log.Fatalf("demo: %v", err)
	}
}

type options struct {
	nWallets, nTransfers, clients int
	initial                       int64
	keep, snapshots               bool
	interval                      time.Duration
	snapshotEvery                 int
	readDSN                       string // -read-dsn: a standby for the store's reads
}

// The defaults of -wallets and -transfers.
const (
	defaultWallets   = 50
	defaultTransfers = 2000
)

// defaultSnapshotEvery is -snapshot-every's default: a default run gives each
// wallet about 70 events (2 + 2 × 2000 transfers × the share committed / 50
// wallets), under the store's default of 100, which wrote no snapshot at all.
const defaultSnapshotEvery = 20

// storeConfig is the demo's store configuration.
func storeConfig(o options, schema string) *eventstore.Config {
	return &eventstore.Config{Schema: schema, SnapshotsDisabled: !o.snapshots, SnapshotEvery: o.snapshotEvery}
}

// snapshotSummary is the summary's line on decision snapshots; when none was
// written, it says why.
func snapshotSummary(o options, st eventstore.SnapshotStats) string {
	if !o.snapshots {
		return "off (-snapshots=false)"
	}
	s := fmt.Sprintf("loaded %d, written %d, write failures %d, ignored %d (one written per %d events a decision folds past a wallet's last)",
		st.Loaded, st.Written, st.WriteFailures, st.IgnoredVersion+st.IgnoredCorrupt+st.IgnoredStale, o.snapshotEvery)
	if st.Written == 0 && st.WriteFailures == 0 {
		s += fmt.Sprintf("\n                       none written: no wallet's decision folded %d events past its last snapshot; lower -snapshot-every or raise -transfers", o.snapshotEvery)
	}
	return s
}

func run(o options) error {
	nWallets, initial, nTransfers, clients := o.nWallets, o.initial, o.nTransfers, o.clients
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
	if !o.keep {
		defer pool.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") //nolint:errcheck
	}
	scfg := storeConfig(o, schema)
	if o.readDSN != "" {
		rcfg, err := pgxpool.ParseConfig(o.readDSN)
		if err != nil {
			return fmt.Errorf("-read-dsn: %w", err)
		}
		rcfg.MaxConns = int32(clients + 4)
		readPool, err := pgxpool.NewWithConfig(ctx, rcfg)
		if err != nil {
			return err
		}
		defer readPool.Close()
		scfg.ReadPool = readPool
		fmt.Println("reads on the standby at -read-dsn; appends on the primary")
	}
	store, err := eventstore.New(pool, scfg)
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
	var rawOK, rawFailed atomic.Int64 // read-after-write checks of committed transfers
	var next atomic.Int64
	lat := make([][]time.Duration, clients)
	ends := make([][]time.Duration, clients) // when each transfer finished, since start
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	stopProgress := progress(o.interval, start, nTransfers, svc, &ok, &insufficient, &conflict, &other)
	for c := range clients {
		wg.Go(func() {
			for next.Add(1) <= int64(nTransfers) {
				from := rand.IntN(nWallets)
				to := (from + 1 + rand.IntN(nWallets-1)) % nWallets
				t0 := time.Now()
				st, body, err := post("/transfers", wallet.TransferRequest{From: ids[from], To: ids[to], Amount: 1 + rand.Int64N(initial/2)})
				lat[c] = append(lat[c], time.Since(t0))
				ends[c] = append(ends[c], time.Since(start))
				var e wallet.Problem
				_ = json.Unmarshal(body, &e)
				switch {
				case err == nil && st == 200:
					ok.Add(1)
					if readYourWrite(hc, api.URL, ids[from], body) {
						rawOK.Add(1)
					} else {
						rawFailed.Add(1)
					}
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
	cpu := cpuTime() - cpu0
	stopProgress()
	after := svc.Executor().Stats()

	// The last event, read on the primary (in a transaction of its pool:
	// with reads on a standby, the store's ReadLast would read there).
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	last, _, err := store.ReadLastTx(ctx, tx, query.All())
	_ = tx.Rollback(ctx)
	if err != nil {
		return err
	}
	if last != nil {
		at := cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}
		// With reads on a standby, let it show that event first
		// (read-your-writes: Store.WaitFor), so that the checks below
		// read the whole log.
		if o.readDSN != "" {
			wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := store.WaitFor(wctx, at)
			cancel()
			if err != nil {
				return fmt.Errorf("waiting for the standby: %w", err)
			}
		}
		// Let the read model catch up, then stop it.
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := balances.WaitFor(wctx, at)
		cancel()
		if err != nil {
			return err
		}
	}
	stopRM()
	if err := <-rmDone; err != nil {
		return fmt.Errorf("read model: %w", err)
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
	fmt.Printf("  read-after-write     %d of %d committed transfers (%.1f%%): GET /balances/{from} after the POST reflected the transfer\n",
		rawOK.Load(), ok.Load(), 100*float64(rawOK.Load())/float64(max(ok.Load(), 1)))
	fmt.Printf("  commands/s           %.0f (each client also reads /balances after each committed transfer)\n", float64(nTransfers)/elapsed.Seconds())
	fmt.Printf("  conflicts            %d (%.1f%% of commands), retries %d\n", conflicts, 100*float64(conflicts)/float64(nTransfers), retries)
	fmt.Printf("  latency p50 %v  p99 %v\n", pct(0.5).Round(time.Microsecond), pct(0.99).Round(time.Microsecond))
	fmt.Printf("  demo process CPU     %.0f%% of one core (client, HTTP server and store)\n", 100*cpu.Seconds()/elapsed.Seconds())
	fmt.Printf("  decision snapshots   %s\n", snapshotSummary(o, store.SnapshotStats()))
	printMinutes(ends, elapsed)
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

// progress prints, every interval, the transfers done, the rate over the
// interval and since start, and the conflicts; stop ends it.
func progress(interval time.Duration, start time.Time, total int, svc *wallet.Service, ok, insufficient, conflict, other *atomic.Int64) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		base := svc.Executor().Stats()
		prevN, prevT := int64(0), start
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				n := ok.Load() + insufficient.Load() + conflict.Load() + other.Load()
				st := svc.Executor().Stats()
				fmt.Printf("[%6s] %d/%d transfers (%.1f%%)  %.0f/s over the last %v, %.0f/s overall  conflicts %d, retries %d, exhausted %d, errors %d\n",
					now.Sub(start).Round(time.Second), n, total, 100*float64(n)/float64(total),
					float64(n-prevN)/now.Sub(prevT).Seconds(), interval, float64(n)/now.Sub(start).Seconds(),
					st.Conflicts-base.Conflicts, st.Retries-base.Retries, conflict.Load(), other.Load())
				prevN, prevT = n, now
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// printMinutes prints the transfers per second of each minute of the run and
// of the last minute against the first (both whole minutes, or the first
// and last halves of a run shorter than two minutes).
func printMinutes(ends [][]time.Duration, elapsed time.Duration) {
	var all []time.Duration
	for _, e := range ends {
		all = append(all, e...)
	}
	count := func(from, to time.Duration) int {
		n := 0
		for _, t := range all {
			if t >= from && t < to {
				n++
			}
		}
		return n
	}
	if elapsed >= 2*time.Minute {
		fmt.Printf("  transfers/s by minute:")
		for m := time.Duration(0); m+time.Minute <= elapsed; m += time.Minute {
			fmt.Printf(" %.0f", float64(count(m, m+time.Minute))/60)
		}
		fmt.Println()
	}
	w := min(time.Minute, elapsed/2)
	if w <= 0 {
		return
	}
	first := float64(count(0, w)) / w.Seconds()
	last := float64(count(elapsed-w, elapsed+1)) / w.Seconds()
	if first > 0 {
		fmt.Printf("  first %v: %.0f transfers/s, last %v: %.0f transfers/s (last/first %.2f)\n",
			w.Round(time.Second), first, w.Round(time.Second), last, last/first)
	}
}

// readYourWrite checks, right after a committed transfer, that GET
// /balances/{from} reflects it: its as_of (the read model's checkpoint) is at
// or after the transfer's cursor. It reports a failure on stderr.
func readYourWrite(hc *http.Client, base, from string, transferBody []byte) bool {
	var tr wallet.TransferResponse
	if err := json.Unmarshal(transferBody, &tr); err != nil {
		fmt.Fprintf(os.Stderr, "read-after-write: transfer response: %v\n", err)
		return false
	}
	want, err := cursor.Parse(tr.Cursor)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read-after-write: transfer cursor: %v\n", err)
		return false
	}
	resp, err := hc.Get(base + "/balances/" + from)
	if err != nil {
		fmt.Fprintf(os.Stderr, "read-after-write: GET: %v\n", err)
		return false
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var wr wallet.WalletResponse
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &wr) != nil {
		fmt.Fprintf(os.Stderr, "read-after-write: GET /balances/%s: %d %s\n", from, resp.StatusCode, raw)
		return false
	}
	at, err := cursor.Parse(wr.AsOf)
	if err != nil || cursor.Compare(at.TransactionID, at.Position, want.TransactionID, want.Position) < 0 {
		fmt.Fprintf(os.Stderr, "read-after-write: GET /balances/%s as of %s, before the transfer at %s\n", from, wr.AsOf, tr.Cursor)
		return false
	}
	return true
}
