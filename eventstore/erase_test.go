package eventstore_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/eventstore"
	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/teststore"
	"github.com/pgdcb/pgdcb/query"
	pgdcbsql "github.com/pgdcb/pgdcb/sql"
)

// testKEK is the tests' key-encryption key.
var testKEK = bytes.Repeat([]byte{0x5a}, 32)

// erasableStore is newStore with a key-encryption key.
func erasableStore(t testing.TB, cfg *eventstore.Config) (*eventstore.Store, *pgxpool.Pool) {
	t.Helper()
	w, err := eventstore.NewAESKeyWrapper(testKEK)
	require.NoError(t, err)
	c := eventstore.Config{}
	if cfg != nil {
		c = *cfg
	}
	c.KEK = w
	return newStore(t, &c)
}

// walletOpened is an event with the personal fields of two subjects and a
// plain one.
func walletOpened(wallet, owner, ownerName, witness, witnessName string) pgdcb.Event {
	return pgdcb.MustEvent("WalletOpened", map[string]any{
		"wallet":  wallet,
		"owner":   pgdcb.Personal(owner, ownerName),
		"witness": pgdcb.Personal(witness, map[string]any{"name": witnessName}),
	}, "wallet="+wallet)
}

type openedData struct {
	Wallet  string          `json:"wallet"`
	Owner   json.RawMessage `json:"owner"`
	Witness json.RawMessage `json:"witness"`
}

func dataOf(t testing.TB, ev pgdcb.StoredEvent) openedData {
	t.Helper()
	var d openedData
	require.NoError(t, json.Unmarshal(ev.Data, &d), string(ev.Data))
	return d
}

// namesModel folds the owners' names (personal data) into its state, and
// snapshots it.
func namesModel(q query.Query) *pgdcb.Model[[]string] {
	return pgdcb.NewModel(q, []string(nil), func(s []string, ev pgdcb.StoredEvent) []string {
		var d struct {
			Owner *string `json:"owner"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Owner == nil {
			return append(s, "<null>")
		}
		return append(s, *d.Owner)
	}).WithSnapshots("names", 1)
}

// hits counts the rows of every table of schema whose text holds marker,
// as text or as the hex of a bytea (decision snapshots' state).
func hits(t testing.TB, pool *pgxpool.Pool, schema, marker string) int {
	t.Helper()
	ctx := context.Background()
	rows, err := pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = $1`, schema)
	require.NoError(t, err)
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Contains(t, tables, "events")
	n := 0
	for _, tb := range tables {
		var c int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, tb}.Sanitize()+` t
			WHERE t::text LIKE '%' || $1 || '%' OR t::text LIKE '%' || $2 || '%'`, marker, hex.EncodeToString([]byte(marker))).Scan(&c))
		n += c
	}
	return n
}

// dumpHits counts marker (as text or hex) in a pg_dump of schema.
func dumpHits(t testing.TB, schema, marker string) int {
	t.Helper()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		t.Skip("no pg_dump")
	}
	out, err := exec.Command("pg_dump", "--dbname", pgtest.DSN(t), "--schema", schema).CombinedOutput()
	require.NoError(t, err, string(out))
	require.Contains(t, string(out), "COPY "+schema+".events")
	return strings.Count(string(out), marker) + strings.Count(string(out), hex.EncodeToString([]byte(marker)))
}

// After Erase, no read path gives the subject's fields: Read, ReadAll,
// ReadLast, ReadTail, Project (from the start and from a snapshot) give
// null in their place, and the table data and a pg_dump of the schema hold
// the marker nowhere; the other subject's field in the same event stays
// readable; events, types, tags, positions and conditions are intact.
func TestEraseRedactsEveryReadPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := erasableStore(t, nil)
	marker := fmt.Sprintf("Ada-Lovelace-%d", time.Now().UnixNano())
	witness := "Charles-Babbage"
	_, err := s.Append(ctx, []pgdcb.Event{walletOpened("w1", "u1", marker, "u2", witness)})
	require.NoError(t, err)
	lastRes, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]any{"amount": 5}, "wallet=w1")})
	require.NoError(t, err)
	q := query.Tagged(nil, "wallet=w1")

	require.Zero(t, hits(t, pool, s.Schema(), marker), "sealed at append: never stored in clear")
	before, _, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, before, 2)
	d := dataOf(t, before[0])
	require.JSONEq(t, `"`+marker+`"`, string(d.Owner), "opened on read")
	require.JSONEq(t, `{"name": "`+witness+`"}`, string(d.Witness))

	// A snapshot that folded the name holds it in clear: the grep sees it.
	// A snapshot of the model that folded the name holds it in clear: the
	// grep sees it. (Stored directly: SaveSnapshot waits for the shared
	// database's horizon.)
	state, err := json.Marshal([]string{marker, "<null>"})
	require.NoError(t, err)
	ok, err := eventstore.StoreSnapshot(ctx, s, "names", 1, q, lastRes.Cursor(), state)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, hits(t, pool, s.Schema(), marker), "the snapshot's state")
	m := namesModel(q)
	_, err = s.Project(ctx, m)
	require.NoError(t, err)
	require.Equal(t, []string{marker, "<null>"}, m.State, "Project starts from the snapshot")
	require.Equal(t, int64(1), s.SnapshotStats().Loaded)

	res, err := s.Erase(ctx, "u1")
	require.NoError(t, err)
	require.Len(t, res.Positions, 1)
	require.Zero(t, hits(t, pool, s.Schema(), marker), "the snapshot that folded the name is gone")

	check := func(what string, evs []pgdcb.StoredEvent) {
		t.Helper()
		require.Len(t, evs, 2, what)
		for i := range evs {
			require.Equal(t, before[i].Position, evs[i].Position, what)
			require.Equal(t, before[i].TransactionID, evs[i].TransactionID, what)
			require.Equal(t, before[i].Type, evs[i].Type, what)
			require.Equal(t, before[i].Tags, evs[i].Tags, what)
			require.NotContains(t, string(evs[i].Data), marker, what)
		}
		d := dataOf(t, evs[0])
		require.Equal(t, "w1", d.Wallet, what)
		require.Equal(t, "null", string(d.Owner), what+": redacted")
		require.JSONEq(t, `{"name": "`+witness+`"}`, string(d.Witness), what+": the other subject's field")
	}
	evs, c, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	check("ReadAll", evs)
	var streamed []pgdcb.StoredEvent
	for ev, err := range s.Read(ctx, q, nil).All() {
		require.NoError(t, err)
		streamed = append(streamed, ev)
	}
	check("Read", streamed)
	last, _, err := s.ReadLast(ctx, query.Tagged([]string{"WalletOpened"}, "wallet=w1"))
	require.NoError(t, err)
	check("ReadLast", []pgdcb.StoredEvent{*last, before[1]})
	var tail []pgdcb.StoredEvent // below the horizon, which other tests' transactions hold back
	await.True(t, time.Minute, "ReadTail reaches both events", func() bool {
		b, err := s.ReadTail(ctx, q, cursor.Cursor{}, 10)
		require.NoError(t, err)
		tail = b.Events
		return len(tail) == 2
	})
	check("ReadTail", tail)

	// Project: the snapshot is gone (it may have folded u1's data), the
	// model folds null; its condition still holds.
	m = namesModel(q)
	cond, err := s.Project(ctx, m)
	require.NoError(t, err)
	require.Equal(t, []string{"<null>", "<null>"}, m.State, "folded from the start")
	require.Equal(t, int64(1), s.SnapshotStats().Loaded, "the snapshot is not used again")
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "wallet=w1")}, cond)
	require.NoError(t, err, "the decision's condition is intact")
	_, err = s.AppendIf(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", 1, "wallet=w1")}, cond)
	require.ErrorIs(t, err, pgdcb.ErrConditionFailed, "and still exact")
	_ = c

	// Readers learn of it.
	erased, _, err := s.ReadAll(ctx, query.Tagged([]string{pgdcb.ErasedEventType}, "pgdcb.subject=u1"), nil)
	require.NoError(t, err)
	require.Len(t, erased, 1)
	require.JSONEq(t, `{"subject": "u1"}`, string(erased[0].Data))

	require.Zero(t, hits(t, pool, s.Schema(), marker), "no table holds the marker")
	require.Zero(t, dumpHits(t, s.Schema(), marker), "nor a pg_dump of the schema")
}

// An append in the caller's transaction seals too, and stays the
// transaction's first write (the subject locks and the key read assign no
// transaction id).
func TestSealedAppendTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, pool := erasableStore(t, nil)
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = s.AppendTx(ctx, tx, []pgdcb.Event{walletOpened("w1", "u1", "Ada", "u2", "Bob")})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	evs, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.JSONEq(t, `"Ada"`, string(dataOf(t, evs[0]).Owner))
	var raw string
	require.NoError(t, pool.QueryRow(ctx, `SELECT data::text FROM `+pgx.Identifier{s.Schema()}.Sanitize()+`.events`).Scan(&raw))
	require.Contains(t, raw, `"pgdcb.sealed"`)
	require.NotContains(t, raw, "Ada")
}

// A store without a key-encryption key refuses personal fields rather than
// store them in clear; a malformed marker is an invalid event.
func TestSealedAppendRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newStore(t, nil)
	_, err := s.Append(ctx, []pgdcb.Event{walletOpened("w1", "u1", "Ada", "u2", "Bob")})
	var ia *pgdcb.InvalidArgumentError
	require.ErrorAs(t, err, &ia)
	require.Equal(t, "Config.KEK", ia.Name)
	s, _ = erasableStore(t, nil)
	_, err = s.Append(ctx, []pgdcb.Event{{Type: "X", Data: json.RawMessage(`{"a": {"pgdcb.personal": {"subject": "", "value": 1}}}`)}})
	require.ErrorIs(t, err, pgdcb.ErrInvalidEvent)
	_, err = s.Erase(ctx, "")
	require.ErrorIs(t, err, pgdcb.ErrInvalidArgument)
	n, _, err := s.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Empty(t, n)
}

// An erasure racing appends for its subject loses nothing and seals
// nothing under the key it destroys: in each round, writers append events
// sealed for the subject while Erase runs; afterwards every append that
// returned is stored, each event before the round's erasure event (in log
// order) reads as null, and each after it reads in clear (sealed under the
// subject's new key).
func TestEraseRacingAppends(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := erasableStore(t, nil)
	const rounds, writers, each = 8, 6, 6
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make(chan error, writers*each+1)
		start := make(chan struct{})
		// The erasure starts once `after` appends of the round returned,
		// later each round: spread over the round by signals, not timing.
		after := int64(r * writers * each / rounds)
		var appended atomic.Int64
		reached := make(chan struct{})
		if after == 0 {
			close(reached)
		}
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range each {
					name := fmt.Sprintf("r%dw%di%d", r, w, i)
					_, err := s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Named",
						map[string]any{"name": pgdcb.Personal("u1", name), "n": name}, fmt.Sprintf("round=%d", r))})
					errs <- err
					if appended.Add(1) == after {
						close(reached)
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-reached
			_, err := s.Erase(ctx, "u1")
			errs <- err
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		evs, _, err := s.ReadAll(ctx, query.Tagged(nil, fmt.Sprintf("round=%d", r)).Or(query.Tagged([]string{pgdcb.ErasedEventType})), nil)
		require.NoError(t, err)
		erasedAt, named := -1, 0
		// The round's erasure is the last erasure event in the log.
		for i := len(evs) - 1; i >= 0; i-- {
			if evs[i].Type == pgdcb.ErasedEventType {
				erasedAt = i
				break
			}
		}
		require.GreaterOrEqual(t, erasedAt, 0)
		for i, ev := range evs {
			if ev.Type != "Named" {
				continue
			}
			named++
			var d struct {
				Name json.RawMessage `json:"name"`
				N    string          `json:"n"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			if i < erasedAt {
				require.Equal(t, "null", string(d.Name), "round %d: %s was appended before the erasure", r, d.N)
			} else {
				require.Equal(t, `"`+d.N+`"`, string(d.Name), "round %d: %s was appended after the erasure: sealed under a destroyed key", r, d.N)
			}
		}
		require.Equal(t, writers*each, named, "round %d: every append is stored", r)
	}
}

// A standby read after Erase gives null at once, whatever the standby's
// replay: keys are looked up on the primary.
func TestEraseOnStandbyRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := pgtest.StandbyPair(t)
	w, err := eventstore.NewAESKeyWrapper(testKEK)
	require.NoError(t, err)
	primary, standby, _, _ := standbyStores(t, pair, &eventstore.Config{KEK: w})
	_, err = primary.Append(ctx, []pgdcb.Event{walletOpened("w1", "u1", "Ada", "u2", "Bob")})
	require.NoError(t, err)
	require.NoError(t, pair.Sync(ctx))
	evs, _, err := standby.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.JSONEq(t, `"Ada"`, string(dataOf(t, evs[0]).Owner))
	withApplyDelay(t, pair, time.Hour) // the standby does not replay the erasure
	_, err = primary.Erase(ctx, "u1")
	require.NoError(t, err)
	evs, _, err = standby.ReadAll(ctx, query.All(), nil)
	require.NoError(t, err)
	require.Len(t, evs, 1, "the standby has not replayed the erasure event")
	require.Equal(t, "null", string(dataOf(t, evs[0]).Owner))
	require.JSONEq(t, `{"name": "Bob"}`, string(dataOf(t, evs[0]).Witness))
}

// A sealed append making a subject's key holds a connection of the store's
// pool (its transaction) and must not wait for another from it: as many
// first sealed appends as the pool has connections, each in a transaction
// of the caller's, all finish (the key is made on the keyring's own pool).
func TestSealedAppendsMakingKeysDoNotExhaustThePool(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pcfg := pgtest.Pool(t).Config()
	pcfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	w, err := eventstore.NewAESKeyWrapper(testKEK)
	require.NoError(t, err)
	s := teststore.OnPool(t, pool, &eventstore.Config{KEK: w})

	// Both transactions hold their connection before either appends.
	txs := make([]pgx.Tx, pcfg.MaxConns)
	for i := range txs {
		txs[i], err = pool.Begin(ctx)
		require.NoError(t, err)
		defer txs[i].Rollback(context.Background())
	}
	var wg sync.WaitGroup
	errs := make([]error, len(txs))
	for i, tx := range txs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := fmt.Sprintf("new-user-%d", i)
			if _, errs[i] = s.AppendTx(ctx, tx, []pgdcb.Event{walletOpened(fmt.Sprint("w", i), sub, "Ada", sub, "Ada")}); errs[i] == nil {
				errs[i] = tx.Commit(ctx)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "append %d", i)
	}
}

// Erase drops every decision snapshot of an older epoch, also where
// transaction ids no longer order the subject's key against the snapshots:
// after sql.RebaseTransactionIDs (a restore into a new cluster) the events
// carry ids smaller than subject_keys.created_xid.
func TestEraseAfterRebaseDropsSnapshotsThatFoldedTheSubject(t *testing.T) {
	ctx := context.Background()
	s, pool := erasableStore(t, nil)
	marker := fmt.Sprintf("Ada-Lovelace-%d", time.Now().UnixNano())
	_, err := s.Append(ctx, []pgdcb.Event{walletOpened("w1", "u1", marker, "u2", "x")})
	require.NoError(t, err)
	_, err = s.Append(ctx, []pgdcb.Event{pgdcb.MustEvent("Deposited", map[string]any{"amount": 5}, "wallet=w1")})
	require.NoError(t, err)
	_, _, err = pgdcbsql.RebaseTransactionIDs(ctx, pool, s.Schema())
	require.NoError(t, err)
	q := query.Tagged(nil, "wallet=w1")
	evs, _, err := s.ReadAll(ctx, q, nil)
	require.NoError(t, err)
	require.Len(t, evs, 2)
	last := evs[1]
	// A decision snapshot folded after the restore, at the log's point.
	state, _ := json.Marshal([]string{marker, "<null>"})
	ok, err := eventstore.StoreSnapshot(ctx, s, "names", 1, q, cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}, state)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, hits(t, pool, s.Schema(), marker))
	_, err = s.Erase(ctx, "u1")
	require.NoError(t, err)
	require.Zero(t, hits(t, pool, s.Schema(), marker), "Erase drops the snapshot that folded the name")
}
