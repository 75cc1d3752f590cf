package wallet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/commands/commandstest"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
)

func newService(t testing.TB) *wallet.Service {
	t.Helper()
	st, _ := teststore.New(t, nil)
	svc, err := wallet.New(st, &wallet.Config{Commands: &commands.Config{MaxAttempts: 50, RetryMin: 1, RetryMax: 2e6}})
	require.NoError(t, err)
	return svc
}

func logLen(t testing.TB, svc *wallet.Service) int {
	t.Helper()
	evs, _, err := svc.Log().ReadAll(context.Background(), query.All(), nil)
	require.NoError(t, err)
	return len(evs)
}

// The domain's rules as given-when-then scenarios (package
// commands/commandstest): on the in-memory store, or on PostgreSQL with
// PGDCB_FIXTURE_STORE=postgres.

// fixture is a scenario fixture with the service over its store.
func fixture(t *testing.T) (*commandstest.Fixture, *wallet.Service) {
	t.Helper()
	fx := commandstest.New(t, nil)
	svc, err := wallet.New(fx.Store(), nil)
	require.NoError(t, err)
	return fx, svc
}

func walletEvent(typ string, d wallet.EventData) pgdcb.Event {
	return pgdcb.MustEvent(typ, d, wallet.TagKey+"="+d.WalletID)
}

func opened(id string) pgdcb.Event {
	return walletEvent(wallet.WalletOpened, wallet.EventData{WalletID: id})
}

func deposited(id string, amount, balance int64) pgdcb.Event {
	return walletEvent(wallet.MoneyDeposited, wallet.EventData{WalletID: id, Amount: amount, Balance: balance})
}

func withdrawn(id string, amount, balance int64) pgdcb.Event {
	return walletEvent(wallet.MoneyWithdrawn, wallet.EventData{WalletID: id, Amount: amount, Balance: balance})
}

func transferred(id uuid.UUID, from, to string, amount, fromBalance, toBalance int64) []pgdcb.Event {
	d := wallet.EventData{Amount: amount, TransferID: id.String(), From: from, To: to}
	sent, recv := d, d
	sent.WalletID, sent.Balance = from, fromBalance
	recv.WalletID, recv.Balance = to, toBalance
	return []pgdcb.Event{walletEvent(wallet.TransferSent, sent), walletEvent(wallet.TransferReceived, recv)}
}

// outcome adapts a service call to commandstest's WhenFunc.
func outcome(call func(ctx context.Context) (wallet.Result, error)) func(context.Context) (commands.Outcome, error) {
	return func(ctx context.Context) (commands.Outcome, error) {
		res, err := call(ctx)
		return res.Outcome, err
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	fx, svc := fixture(t)
	fx.Given().WhenFunc(outcome(func(ctx context.Context) (wallet.Result, error) { return svc.Open(ctx, "w1", nil) })).
		Then(opened("w1"))
	fx.Given().WhenFunc(outcome(func(ctx context.Context) (wallet.Result, error) { return svc.Open(ctx, "w1", nil) })).
		ThenError(wallet.ErrWalletExists)
	fx.Given().WhenFunc(outcome(func(ctx context.Context) (wallet.Result, error) { return svc.Open(ctx, "bad id!", nil) })).
		ThenError(wallet.ErrInvalidWalletID)

	ctx := context.Background()
	v, err := svc.Wallet(ctx, "w1")
	require.NoError(t, err)
	require.Zero(t, v.Balance)
	_, err = svc.Wallet(ctx, "nope")
	require.ErrorIs(t, err, wallet.ErrWalletNotFound)
}

func TestDepositAndWithdraw(t *testing.T) {
	t.Parallel()
	deposit := func(svc *wallet.Service, id string, amount int64) func(context.Context) (commands.Outcome, error) {
		return outcome(func(ctx context.Context) (wallet.Result, error) { return svc.Deposit(ctx, id, amount, nil) })
	}
	withdraw := func(svc *wallet.Service, id string, amount int64) func(context.Context) (commands.Outcome, error) {
		return outcome(func(ctx context.Context) (wallet.Result, error) { return svc.Withdraw(ctx, id, amount, nil) })
	}
	for name, tc := range map[string]struct {
		given []pgdcb.Event
		when  func(svc *wallet.Service) func(context.Context) (commands.Outcome, error)
		then  []pgdcb.Event
		err   error
	}{
		"deposit": {[]pgdcb.Event{opened("w1")},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return deposit(svc, "w1", 100)
			},
			[]pgdcb.Event{deposited("w1", 100, 100)}, nil},
		"withdraw": {[]pgdcb.Event{opened("w1"), deposited("w1", 100, 100)},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return withdraw(svc, "w1", 30)
			},
			[]pgdcb.Event{withdrawn("w1", 30, 70)}, nil},
		"withdraw everything": {[]pgdcb.Event{opened("w1"), deposited("w1", 100, 100), withdrawn("w1", 30, 70)},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return withdraw(svc, "w1", 70)
			},
			[]pgdcb.Event{withdrawn("w1", 70, 0)}, nil},
		"overdraft": {[]pgdcb.Event{opened("w1"), deposited("w1", 100, 100), withdrawn("w1", 30, 70)},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return withdraw(svc, "w1", 71)
			},
			nil, wallet.ErrInsufficientFunds},
		"deposit zero": {[]pgdcb.Event{opened("w1")},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return deposit(svc, "w1", 0)
			},
			nil, wallet.ErrInvalidAmount},
		"withdraw a negative amount": {[]pgdcb.Event{opened("w1")},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return withdraw(svc, "w1", -5)
			},
			nil, wallet.ErrInvalidAmount},
		"deposit to an unknown wallet": {nil,
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return deposit(svc, "ghost", 1)
			},
			nil, wallet.ErrWalletNotFound},
		"withdraw from an unknown wallet": {nil,
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return withdraw(svc, "ghost", 1)
			},
			nil, wallet.ErrWalletNotFound},
		"balance overflow": {[]pgdcb.Event{opened("w1"), deposited("w1", 1, 1)},
			func(svc *wallet.Service) func(context.Context) (commands.Outcome, error) {
				return deposit(svc, "w1", math.MaxInt64)
			},
			nil, wallet.ErrInvalidAmount},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx, svc := fixture(t)
			sc := fx.Given(tc.given...).WhenFunc(tc.when(svc))
			if tc.err != nil {
				sc.ThenError(tc.err)
				return
			}
			sc.Then(tc.then...)
		})
	}
}

func TestTransfer(t *testing.T) {
	t.Parallel()
	id := uuid.New()
	transfer := func(svc *wallet.Service, from, to string, amount int64) func(context.Context) (commands.Outcome, error) {
		return outcome(func(ctx context.Context) (wallet.Result, error) {
			return svc.Transfer(ctx, from, to, amount, &wallet.Options{CommandID: id})
		})
	}
	given := []pgdcb.Event{opened("a"), opened("b"), deposited("a", 100, 100), deposited("b", 5, 5)}

	fx, svc := fixture(t)
	out := fx.Given(given...).WhenFunc(transfer(svc, "a", "b", 60)).Then(transferred(id, "a", "b", 60, 40, 65)...)
	require.Equal(t, out.Events[0].TransactionID, out.Events[1].TransactionID, "one transaction")

	for name, tc := range map[string]struct {
		from, to string
		amount   int64
		err      error
	}{
		"overdraft":         {"a", "b", 101, wallet.ErrInsufficientFunds},
		"same wallet":       {"a", "a", 1, wallet.ErrSameWallet},
		"unknown target":    {"a", "ghost", 1, wallet.ErrWalletNotFound},
		"unknown source":    {"ghost", "a", 1, wallet.ErrWalletNotFound},
		"zero":              {"a", "b", 0, wallet.ErrInvalidAmount},
		"invalid wallet id": {"a", "b c", 1, wallet.ErrInvalidWalletID},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx, svc := fixture(t)
			fx.Given(given...).WhenFunc(transfer(svc, tc.from, tc.to, tc.amount)).ThenError(tc.err)
		})
	}
	t.Run("target would overflow", func(t *testing.T) {
		t.Parallel()
		fx, svc := fixture(t)
		fx.Given(opened("a"), opened("b"), deposited("a", 1, 1), deposited("b", math.MaxInt64, math.MaxInt64)).
			WhenFunc(transfer(svc, "a", "b", 1)).ThenError(wallet.ErrInvalidAmount)
	})
}

func TestIfMatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	for _, id := range []string{"a", "b"} {
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
	}
	v, err := svc.Wallet(ctx, "a")
	require.NoError(t, err)
	// A change to another wallet does not make a's cursor stale.
	_, err = svc.Deposit(ctx, "b", 5, nil)
	require.NoError(t, err)
	_, err = svc.Deposit(ctx, "a", 10, &wallet.Options{IfMatch: wallet.IfMatch(v.Version)})
	require.NoError(t, err)
	// Now a changed since v.
	n := logLen(t, svc)
	_, err = svc.Deposit(ctx, "a", 10, &wallet.Options{IfMatch: wallet.IfMatch(v.Version)})
	require.ErrorIs(t, err, wallet.ErrStale)
	_, err = svc.Withdraw(ctx, "a", 1, &wallet.Options{IfMatch: wallet.IfMatch(v.Version)})
	require.ErrorIs(t, err, wallet.ErrStale)
	_, err = svc.Transfer(ctx, "a", "b", 1, &wallet.Options{IfMatch: wallet.IfMatch(v.Version)})
	require.ErrorIs(t, err, wallet.ErrStale)
	require.Equal(t, n, logLen(t, svc))
	v2, err := svc.Wallet(ctx, "a")
	require.NoError(t, err)
	_, err = svc.Transfer(ctx, "a", "b", 1, &wallet.Options{IfMatch: wallet.IfMatch(v2.Version)})
	require.NoError(t, err)
}

func TestCommandIDIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	_, err := svc.Open(ctx, "a", nil)
	require.NoError(t, err)
	_, err = svc.Open(ctx, "b", nil)
	require.NoError(t, err)
	_, err = svc.Deposit(ctx, "a", 100, nil)
	require.NoError(t, err)
	opt := &wallet.Options{CommandID: uuid.New()}
	var wg sync.WaitGroup
	results := make([]wallet.Result, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = svc.Transfer(ctx, "a", "b", 70, opt) })
	}
	wg.Wait()
	fresh := 0
	for i := range results {
		require.NoError(t, errs[i])
		require.EqualValues(t, 30, results[i].Balance)
		if !results[i].Outcome.Duplicate {
			fresh++
		}
	}
	require.Equal(t, 1, fresh)
	v, err := svc.Wallet(ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 30, v.Balance)
}

// replay folds the whole log in log order and fails if any balance goes
// negative; it returns the final balances.
func replay(t testing.TB, svc *wallet.Service) map[string]int64 {
	t.Helper()
	evs, _, err := svc.Log().ReadAll(context.Background(), query.All(), nil)
	require.NoError(t, err)
	bal := map[string]int64{}
	for _, ev := range evs {
		id, _ := ev.Tags.Get(wallet.TagKey)
		d, err := wallet.Delta(ev)
		require.NoError(t, err)
		bal[id] += d
		require.GreaterOrEqual(t, bal[id], int64(0), "wallet %s negative at position %d", id, ev.Position)
		var data wallet.EventData
		require.NoError(t, json.Unmarshal(ev.Data, &data))
		if ev.Type != wallet.WalletOpened {
			require.Equal(t, bal[id], data.Balance, "decided balance matches the replay at %d", ev.Position)
		}
	}
	return bal
}

// Many concurrent transfers over few wallets: no balance ever negative in log
// order, money conserved, every decided balance equal to the replay.
func TestConcurrentTransfersKeepInvariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	const wallets, initial, workers, perWorker = 5, 100, 8, 25
	for i := range wallets {
		id := fmt.Sprint("w", i)
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
		_, err = svc.Deposit(ctx, id, initial, nil)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, insufficient := 0, 0
	for range workers {
		wg.Go(func() {
			for range perWorker {
				from := rand.IntN(wallets)
				to := (from + 1 + rand.IntN(wallets-1)) % wallets
				_, err := svc.Transfer(ctx, fmt.Sprint("w", from), fmt.Sprint("w", to), int64(1+rand.IntN(80)), nil)
				mu.Lock()
				switch {
				case err == nil:
					ok++
				case err == wallet.ErrInsufficientFunds:
					insufficient++
				default:
					t.Errorf("transfer: %v", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	require.Equal(t, workers*perWorker, ok+insufficient)
	require.Positive(t, ok)
	bal := replay(t, svc)
	var total int64
	for i := range wallets {
		id := fmt.Sprint("w", i)
		total += bal[id]
		v, err := svc.Wallet(ctx, id)
		require.NoError(t, err)
		require.Equal(t, bal[id], v.Balance)
	}
	require.EqualValues(t, wallets*initial, total)
	st := svc.Executor().Stats()
	t.Logf("transfers ok=%d insufficient=%d conflicts=%d retries=%d", ok, insufficient, st.Conflicts, st.Retries)
	require.Zero(t, st.Exhausted)
}

// Withdrawals racing on one wallet never overdraw it.
func TestConcurrentWithdrawalsNeverOverdraw(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	for round := range 10 {
		id := fmt.Sprint("r", round)
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
		_, err = svc.Deposit(ctx, id, 50, nil)
		require.NoError(t, err)
		var wg sync.WaitGroup
		var mu sync.Mutex
		succeeded := 0
		for range 8 {
			wg.Go(func() {
				_, err := svc.Withdraw(ctx, id, 10, nil)
				if err != nil && err != wallet.ErrInsufficientFunds {
					require.ErrorIs(t, err, pgdcb.ErrConditionFailed) // only exhaustion is tolerated
				}
				if err == nil {
					mu.Lock()
					succeeded++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		require.Equal(t, 5, succeeded, "round %d", round)
		v, err := svc.Wallet(ctx, id)
		require.NoError(t, err)
		require.Zero(t, v.Balance)
	}
	replay(t, svc)
}

// With a Fingerprint, a command id answers only the request it was first run
// with (ErrKeyReused otherwise), and a run while another session holds the id
// is refused (ErrInFlight) until the first is recorded, then replayed.
func TestFingerprintAndInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc := newService(t)
	for _, id := range []string{"a", "b"} {
		_, err := svc.Open(ctx, id, nil)
		require.NoError(t, err)
	}
	id := uuid.New()
	first, err := svc.Deposit(ctx, "a", 5, &wallet.Options{CommandID: id, Fingerprint: "f1"})
	require.NoError(t, err)
	require.False(t, first.Outcome.Duplicate)
	again, err := svc.Deposit(ctx, "a", 5, &wallet.Options{CommandID: id, Fingerprint: "f1"})
	require.NoError(t, err)
	require.True(t, again.Outcome.Duplicate)
	require.Equal(t, first.Outcome.TransactionID, again.Outcome.TransactionID)
	n := logLen(t, svc)
	for _, run := range []func() error{
		func() error {
			_, err := svc.Deposit(ctx, "a", 5, &wallet.Options{CommandID: id, Fingerprint: "f2"})
			return err
		},
		func() error {
			_, err := svc.Deposit(ctx, "b", 9, &wallet.Options{CommandID: id, Fingerprint: "f2"})
			return err
		},
		func() error {
			_, err := svc.Open(ctx, "c", &wallet.Options{CommandID: id, Fingerprint: "f3"})
			return err
		},
	} {
		require.ErrorIs(t, run(), wallet.ErrKeyReused)
	}
	require.Equal(t, n, logLen(t, svc))
	// Without a fingerprint: the first outcome, whatever the request.
	res, err := svc.Deposit(ctx, "b", 9, &wallet.Options{CommandID: id})
	require.NoError(t, err)
	require.True(t, res.Outcome.Duplicate)
	require.Equal(t, "a", res.WalletID)

	// Another session holds a fresh id's lock: the run is refused, nothing appended.
	conn, err := svc.Store().Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	id2 := uuid.New()
	k1, k2 := wallet.IdempotencyLockKey(svc.Store().Schema(), id2)
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, k1, k2)
	require.NoError(t, err)
	_, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id2, Fingerprint: "g"})
	require.ErrorIs(t, err, wallet.ErrInFlight)
	require.Equal(t, n, logLen(t, svc))
	// Without a fingerprint the lock is not consulted.
	_, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id2})
	require.NoError(t, err)
	// Once recorded, a run that finds the lock still held replays (or refuses
	// another request) instead of answering 409.
	res, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id2, Fingerprint: ""})
	require.NoError(t, err)
	require.True(t, res.Outcome.Duplicate)
	_, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id2, Fingerprint: "g"})
	require.ErrorIs(t, err, wallet.ErrKeyReused, "recorded without a fingerprint: another request")
	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, k1, k2)
	require.NoError(t, err)

	// The same with a recorded fingerprint: replay while the lock is held.
	id3 := uuid.New()
	_, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id3, Fingerprint: "h"})
	require.NoError(t, err)
	// The service released its lock: the id can be claimed here.
	k1, k2 = wallet.IdempotencyLockKey(svc.Store().Schema(), id3)
	var got bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, k1, k2).Scan(&got))
	require.True(t, got)
	res, err = svc.Deposit(ctx, "a", 1, &wallet.Options{CommandID: id3, Fingerprint: "h"})
	require.NoError(t, err)
	require.True(t, res.Outcome.Duplicate)
	_, err = svc.Deposit(ctx, "a", 2, &wallet.Options{CommandID: id3, Fingerprint: "h2"})
	require.ErrorIs(t, err, wallet.ErrKeyReused)
	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, k1, k2)
	require.NoError(t, err)
}
