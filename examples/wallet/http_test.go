package wallet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/cursor"
	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/query"
)

type client struct {
	t   *testing.T
	srv *httptest.Server
}

func (c client) do(method, path, body string, hdr ...string) (int, http.Header, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	require.NoError(c.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Content-Type" {
			req.Header.Del(hdr[i])
			if hdr[i+1] == "" {
				continue
			}
		}
		req.Header.Add(hdr[i], hdr[i+1]) // a header given twice is sent as two lines
	}
	resp, err := c.srv.Client().Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	var m map[string]any
	require.NoError(c.t, json.Unmarshal(raw, &m), "body %s", raw)
	return resp.StatusCode, resp.Header, m
}

// expectError checks status, code and that the body has an error message.
func (c client) expectError(status int, code, method, path, body string, hdr ...string) {
	c.t.Helper()
	st, _, m := c.do(method, path, body, hdr...)
	require.Equal(c.t, status, st, "%s %s %s: %v", method, path, body, m)
	require.Equal(c.t, code, m["code"])
	require.NotEmpty(c.t, m["detail"])
	require.Equal(c.t, wallet.ProblemTypePrefix+code, m["type"])
	require.NotEmpty(c.t, m["title"])
	require.EqualValues(c.t, status, m["status"])
}

// newAPI serves the API with the balances read model running.
func newAPI(t *testing.T) (client, *wallet.Service, *wallet.Balances) {
	svc := newService(t)
	// ReadWait of a minute, not the default 2 s: on a shared test server
	// another test's transaction in this database may hold the tailing
	// horizon for seconds (the read model then waits for it, as it must).
	b := wallet.NewBalances(svc.Store(), &wallet.BalancesConfig{ReadWait: time.Minute})
	require.NoError(t, b.Setup(context.Background()))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	t.Cleanup(func() { stop(); require.NoError(t, <-done) })
	srv := httptest.NewServer(wallet.NewAPI(svc, b))
	t.Cleanup(srv.Close)
	return client{t, srv}, svc, b
}

func TestHTTPHappyPath(t *testing.T) {
	t.Parallel()
	c, svc, b := newAPI(t)
	st, hdr, m := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	require.Equal(t, "/wallets/a", hdr.Get("Location"))
	require.Equal(t, "a", m["wallet_id"])
	st, _, _ = c.do("POST", "/wallets", `{"wallet_id":"b"}`)
	require.Equal(t, 201, st)

	st, _, m = c.do("POST", "/wallets/a/deposits", `{"amount":100}`)
	require.Equal(t, 200, st)
	require.EqualValues(t, 100, m["balance"])
	st, _, m = c.do("POST", "/wallets/a/withdrawals", `{"amount":10}`)
	require.Equal(t, 200, st)
	require.EqualValues(t, 90, m["balance"])
	st, _, m = c.do("POST", "/transfers", `{"from":"a","to":"b","amount":40}`)
	require.Equal(t, 200, st)
	require.EqualValues(t, 50, m["from_balance"])
	require.EqualValues(t, 40, m["to_balance"])
	transferAt, err := cursor.Parse(m["cursor"].(string))
	require.NoError(t, err)

	// Read your writes: the read model answers with the transfer in it, at
	// once after the POST, and says so in as_of.
	for _, w := range []struct {
		id      string
		balance int64
	}{{"a", 50}, {"b", 40}} {
		st, _, m = c.do("GET", "/balances/"+w.id, "")
		require.Equal(t, 200, st, "%v", m)
		require.EqualValues(t, w.balance, m["balance"], w.id)
		asOf, err := cursor.Parse(m["as_of"].(string))
		require.NoError(t, err)
		require.GreaterOrEqual(t, cursor.Compare(asOf.TransactionID, asOf.Position, transferAt.TransactionID, transferAt.Position), 0,
			"as_of %v is before the transfer %v", asOf, transferAt)
	}

	st, hdr, m = c.do("GET", "/wallets/a", "")
	require.Equal(t, 200, st)
	require.EqualValues(t, 50, m["balance"])
	require.NotEmpty(t, hdr.Get("ETag"))

	last, _, err := svc.Store().ReadLast(context.Background(), query.All())
	require.NoError(t, err)
	require.NoError(t, b.WaitFor(context.Background(), cursor.Cursor{TransactionID: last.TransactionID, Position: last.Position}))
}

// A read model that does not get to the wallet's last event within ReadWait
// (here: it is not running) answers 503 read_model_behind, never a stale
// balance.
func TestHTTPBalancesBehind(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	b := wallet.NewBalances(svc.Store(), &wallet.BalancesConfig{ReadWait: 50 * time.Millisecond})
	require.NoError(t, b.Setup(context.Background()))
	srv := httptest.NewServer(wallet.NewAPI(svc, b))
	t.Cleanup(srv.Close)
	c := client{t, srv}
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	c.expectError(503, "read_model_behind", "GET", "/balances/a", "")
}

func TestHTTPETag(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	c.do("POST", "/wallets", `{"wallet_id":"b"}`)
	c.do("POST", "/wallets/a/deposits", `{"amount":100}`)
	_, hdr, _ := c.do("GET", "/wallets/a", "")
	tag := hdr.Get("ETag")
	// Another wallet's change leaves a's ETag valid.
	c.do("POST", "/wallets/b/deposits", `{"amount":1}`)
	st, _, _ := c.do("POST", "/wallets/a/withdrawals", `{"amount":10}`, "If-Match", tag)
	require.Equal(t, 200, st)
	// a changed: the old ETag is stale, nothing appended.
	n := logLen(t, svc)
	c.expectError(412, "stale_etag", "POST", "/wallets/a/withdrawals", `{"amount":10}`, "If-Match", tag)
	c.expectError(412, "stale_etag", "POST", "/wallets/a/deposits", `{"amount":10}`, "If-Match", tag)
	c.expectError(412, "stale_etag", "POST", "/transfers", `{"from":"a","to":"b","amount":1}`, "If-Match", tag)
	c.expectError(412, "stale_etag", "POST", "/wallets/a/deposits", `{"amount":10}`, "If-Match", `"!!not-a-cursor"`)
	c.expectError(400, "bad_etag", "POST", "/wallets/a/deposits", `{"amount":10}`, "If-Match", `not-quoted`)
	require.Equal(t, n, logLen(t, svc))
	_, hdr, _ = c.do("GET", "/wallets/a", "")
	st, _, _ = c.do("POST", "/transfers", `{"from":"a","to":"b","amount":1}`, "If-Match", hdr.Get("ETag"))
	require.Equal(t, 200, st)
}

func TestHTTPIdempotencyKey(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	key := uuid.NewString()
	st, hdr, m1 := c.do("POST", "/wallets/a/deposits", `{"amount":7}`, "Idempotency-Key", key)
	require.Equal(t, 200, st)
	require.Empty(t, hdr.Get("Idempotent-Replayed"))
	n := logLen(t, svc)
	st, hdr, m2 := c.do("POST", "/wallets/a/deposits", `{"amount":7}`, "Idempotency-Key", key)
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, m1, m2)
	require.Equal(t, n, logLen(t, svc))
	c.expectError(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":7}`, "Idempotency-Key", "no pe")

	// The same request written differently (spacing, key order) is the same
	// request; the key may be sent as a structured-field string (quoted).
	st, hdr, m3 := c.do("POST", "/wallets/a/deposits", "{ \"amount\" : 7 }\n", "Idempotency-Key", `"`+key+`"`)
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, m1, m3)

	// A replayed transfer and a replayed open answer with the first outcome.
	st, _, o1 := c.do("POST", "/wallets", `{"wallet_id":"b"}`, "Idempotency-Key", key)
	require.Equal(t, 422, st, "a key used for a deposit cannot open a wallet") // see TestHTTPIdempotencyKeyReuse
	require.Equal(t, "idempotency_key_reused", o1["code"])
	okey := uuid.NewString()
	st, _, o1 = c.do("POST", "/wallets", `{"wallet_id":"b"}`, "Idempotency-Key", okey)
	require.Equal(t, 201, st)
	st, hdr, o2 := c.do("POST", "/wallets", `{"wallet_id":"b"}`, "Idempotency-Key", okey)
	require.Equal(t, 201, st)
	require.Equal(t, "/wallets/b", hdr.Get("Location"))
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, o1, o2)
	tkey := uuid.NewString()
	st, _, t1 := c.do("POST", "/transfers", `{"from":"a","to":"b","amount":3}`, "Idempotency-Key", tkey)
	require.Equal(t, 200, st)
	require.EqualValues(t, 3, t1["amount"])
	st, hdr, t2 := c.do("POST", "/transfers", `{"to":"b","from":"a","amount":3}`, "Idempotency-Key", tkey)
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, t1, t2)
}

// A key reused with another request (amount, endpoint, wallet, body) is 422,
// whether the first request is found by the store's idempotency check, by the
// handler's rejection, or before deciding; nothing is appended.
func TestHTTPIdempotencyKeyReuse(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	for _, id := range []string{"a", "b", "c"} {
		st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"`+id+`"}`)
		require.Equal(t, 201, st)
	}
	st, _, _ := c.do("POST", "/wallets/a/deposits", `{"amount":100}`)
	require.Equal(t, 200, st)

	dkey, tkey, okey := uuid.NewString(), uuid.NewString(), uuid.NewString()
	st, _, _ = c.do("POST", "/wallets/a/deposits", `{"amount":7}`, "Idempotency-Key", dkey)
	require.Equal(t, 200, st)
	st, _, _ = c.do("POST", "/transfers", `{"from":"a","to":"b","amount":3}`, "Idempotency-Key", tkey)
	require.Equal(t, 200, st)
	st, _, _ = c.do("POST", "/wallets", `{"wallet_id":"d"}`, "Idempotency-Key", okey)
	require.Equal(t, 201, st)
	n := logLen(t, svc)
	cases := []struct{ key, path, body string }{
		{dkey, "/wallets/a/deposits", `{"amount":8}`},            // other amount
		{dkey, "/wallets/a/withdrawals", `{"amount":7}`},         // other endpoint
		{dkey, "/wallets/b/deposits", `{"amount":7}`},            // other wallet
		{dkey, "/wallets/ghost/deposits", `{"amount":7}`},        // the handler rejects it: found by the rejection lookup
		{dkey, "/transfers", `{"from":"a","to":"b","amount":7}`}, // other command
		{tkey, "/transfers", `{"from":"a","to":"c","amount":3}`}, // other target
		{tkey, "/transfers", `{"from":"a","to":"b","amount":5}`}, // other amount
		{tkey, "/wallets/a/deposits", `{"amount":3}`},
		{okey, "/wallets", `{"wallet_id":"e"}`}, // other wallet to open
		{okey, "/wallets/d/deposits", `{"amount":1}`},
	}
	for _, tc := range cases {
		t.Run(tc.path+tc.body, func(t *testing.T) {
			c := client{t, c.srv}
			st, hdr, m := c.do("POST", tc.path, tc.body, "Idempotency-Key", tc.key)
			require.Equal(t, 422, st, "%v", m)
			require.Equal(t, "idempotency_key_reused", m["code"])
			require.NotEmpty(t, m["detail"])
			require.Empty(t, hdr.Get("Idempotent-Replayed"))
		})
	}
	require.Equal(t, n, logLen(t, svc), "a reused key appends nothing")
	_, err := svc.Wallet(context.Background(), "e")
	require.ErrorIs(t, err, wallet.ErrWalletNotFound)
}

// Duplicates racing with the first request: exactly one executes; each other
// either sees the first finished (200, replayed, the same body) or finds it in
// flight (409 idempotency_key_in_flight). Many rounds; some 409 must occur.
func TestHTTPIdempotencyKeyConcurrent(t *testing.T) {
	c, svc, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	const rounds, dups = 30, 6
	inFlight := 0
	for round := range rounds {
		key := uuid.NewString()
		type answer struct {
			st  int
			hdr http.Header
			m   map[string]any
		}
		answers := make([]answer, dups)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() {
				a := &answers[i]
				a.st, a.hdr, a.m = c.do("POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", key)
			})
		}
		wg.Wait()
		var first map[string]any
		for _, a := range answers {
			if a.st == 200 && a.hdr.Get("Idempotent-Replayed") == "" {
				require.Nil(t, first, "round %d: two requests executed", round)
				first = a.m
			}
		}
		require.NotNil(t, first, "round %d: no request executed: %v", round, answers)
		for _, a := range answers {
			switch {
			case a.st == 409:
				require.Equal(t, "idempotency_key_in_flight", a.m["code"])
				inFlight++
			case a.st == 200 && a.hdr.Get("Idempotent-Replayed") == "true":
				require.Equal(t, first, a.m)
			default:
				require.Equal(t, first, a.m, "round %d: %d %v", round, a.st, a.m)
			}
		}
		v, err := svc.Wallet(context.Background(), "a")
		require.NoError(t, err)
		require.EqualValues(t, round+1, v.Balance, "round %d", round)
	}
	t.Logf("%d of %d duplicates found the first in flight", inFlight, rounds*(dups-1))
	require.Positive(t, inFlight, "no duplicate ever raced the first request")
}

// A request whose key another session holds (another instance still running
// it) is 409 with the JSON error, and appends nothing.
func TestHTTPIdempotencyKeyInFlight(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	ctx := context.Background()
	conn, err := svc.Store().Pool().Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	key := uuid.New()
	k1, k2 := wallet.IdempotencyLockKey(svc.Store().Schema(), key)
	_, err = conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, k1, k2)
	require.NoError(t, err)
	n := logLen(t, svc)
	c.expectError(409, "idempotency_key_in_flight", "POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", key.String())
	require.Equal(t, n, logLen(t, svc))
	_, err = conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, k1, k2)
	require.NoError(t, err)
	st, hdr, _ := c.do("POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", key.String())
	require.Equal(t, 200, st)
	require.Empty(t, hdr.Get("Idempotent-Replayed"))
}

// Every error is a problem details object, including the router's 404 and 405.
func TestHTTPRouterErrorsAreJSON(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	c.expectError(404, "not_found", "GET", "/nope", "")
	c.expectError(404, "not_found", "POST", "/wallets/a/nope", `{}`)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/wallets/a", "GET, HEAD"},
		{"PUT", "/wallets", "POST"},
		{"GET", "/transfers", "POST"},
		{"GET", "/wallets/a/deposits", "POST"},
	} {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			c := client{t, c.srv}
			st, hdr, m := c.do(tc.method, tc.path, "")
			require.Equal(t, 405, st, "%s %s", tc.method, tc.path)
			require.Equal(t, "method_not_allowed", m["code"])
			require.NotEmpty(t, m["detail"])
			require.Equal(t, tc.allow, hdr.Get("Allow"))
			require.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
		})
	}
}

// Command bodies must be application/json.
func TestHTTPContentType(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`, "Content-Type", "application/json; charset=utf-8")
	require.Equal(t, 201, st)
	st, _, _ = c.do("POST", "/wallets/a/deposits", `{"amount":1}`, "Content-Type", "Application/JSON")
	require.Equal(t, 200, st)
	n := logLen(t, svc)
	for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/json; charset", "multipart/form-data; boundary=x"} {
		t.Run("Content-Type="+ct, func(t *testing.T) {
			c := client{t, c.srv}
			c.expectError(415, "unsupported_media_type", "POST", "/wallets/a/deposits", `{"amount":1}`, "Content-Type", ct)
			c.expectError(415, "unsupported_media_type", "POST", "/transfers", `{"from":"a","to":"b","amount":1}`, "Content-Type", ct)
			c.expectError(415, "unsupported_media_type", "POST", "/wallets", `{"wallet_id":"z"}`, "Content-Type", ct)
		})
	}
	require.Equal(t, n, logLen(t, svc))
}

// If-Match follows RFC 9110 §13.1.1: a list of entity-tags or *, compared
// strongly (a weak tag never matches); a malformed field is 400, no match 412.
func TestHTTPIfMatchRFC9110(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	c.do("POST", "/wallets", `{"wallet_id":"b"}`)
	c.do("POST", "/wallets/a/deposits", `{"amount":100}`)
	_, hdr, _ := c.do("GET", "/wallets/a", "")
	old := hdr.Get("ETag")
	c.do("POST", "/wallets/a/deposits", `{"amount":1}`)
	_, hdr, _ = c.do("GET", "/wallets/a", "")
	fresh := hdr.Get("ETag")
	require.NotEqual(t, old, fresh)
	weak := "W/" + fresh

	n := logLen(t, svc)
	for _, im := range [][]string{
		{old},
		{weak},
		{`"not-ours"`},
		{old + ", " + weak},
		{old, weak}, // two field lines
		{""},        // an empty list: nothing to match
		{" , ,"},    // empty list elements only
		{`W/"` + strings.Trim(old, `"`) + `"`},
	} {
		t.Run(fmt.Sprintf("If-Match %q", im), func(t *testing.T) {
			c := client{t, c.srv}
			hdrs := []string{}
			for _, v := range im {
				hdrs = append(hdrs, "If-Match", v)
			}
			c.expectError(412, "stale_etag", "POST", "/wallets/a/withdrawals", `{"amount":1}`, hdrs...)
			c.expectError(412, "stale_etag", "POST", "/transfers", `{"from":"a","to":"b","amount":1}`, hdrs...)
		})
	}
	for _, im := range []string{
		`abc`, `"abc`, `abc"`, `"a" "b"`, `"a",b`, `*, ` + fresh, fresh + `, *`, `**`,
		`w/` + fresh, `W/ ` + fresh, `W/`, `"a b"`, `"a"b"`, `"a"x`, `W/W/"a"`,
	} {
		t.Run("If-Match "+im, func(t *testing.T) {
			c := client{t, c.srv}
			c.expectError(400, "bad_etag", "POST", "/wallets/a/withdrawals", `{"amount":1}`, "If-Match", im)
		})
	}
	// Preconditions are ignored when the answer would not be 2xx anyway.
	c.expectError(404, "wallet_not_found", "POST", "/wallets/ghost/deposits", `{"amount":1}`, "If-Match", old)
	require.Equal(t, n, logLen(t, svc), "no failed precondition appends")

	for _, im := range []func(fresh string) []string{
		func(fresh string) []string { return []string{fresh} },
		func(string) []string { return []string{"*"} },
		func(fresh string) []string { return []string{old + "," + fresh} },
		func(fresh string) []string { return []string{weak + ",  " + `"not-ours"` + " ,\t" + fresh + ","} },
		func(fresh string) []string { return []string{old, fresh} },
	} {
		hdrs := []string{}
		for _, v := range im(fresh) {
			hdrs = append(hdrs, "If-Match", v)
		}
		st, _, m := c.do("POST", "/wallets/a/withdrawals", `{"amount":1}`, hdrs...)
		require.Equal(t, 200, st, "If-Match %q: %v", im(fresh), m)
		// The withdrawal changed a: get its new tag.
		_, hdr, _ = c.do("GET", "/wallets/a", "")
		fresh = hdr.Get("ETag")
	}
}

func TestHTTPBadInput(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	c.do("POST", "/wallets", `{"wallet_id":"b"}`)
	c.do("POST", "/wallets/a/deposits", `{"amount":5}`)
	n := logLen(t, svc)
	cases := []struct {
		status       int
		code, method string
		path, body   string
	}{
		{400, "bad_json", "POST", "/wallets", `{"wallet_id":`},
		{400, "bad_json", "POST", "/wallets", `{"wallet_id":"x","extra":1}`},
		{400, "invalid_wallet_id", "POST", "/wallets", `{"wallet_id":"has space"}`},
		{400, "invalid_wallet_id", "POST", "/wallets", `{}`},
		{409, "wallet_exists", "POST", "/wallets", `{"wallet_id":"a"}`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `not json`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `{"amount":1.5}`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `{"amount":"10"}`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `{"amount":1}{"amount":2}`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `{"amount":1} }`},
		{413, "body_too_large", "POST", "/wallets/a/deposits", `{"amount":1}` + strings.Repeat(" ", wallet.MaxBodyBytes)},
		{400, "invalid_amount", "POST", "/wallets/a/deposits", `{"amount":0}`},
		{400, "invalid_amount", "POST", "/wallets/a/deposits", `{"amount":-3}`},
		{400, "invalid_amount", "POST", "/wallets/a/withdrawals", `{}`},
		{404, "wallet_not_found", "POST", "/wallets/ghost/deposits", `{"amount":1}`},
		{404, "wallet_not_found", "POST", "/wallets/ghost/withdrawals", `{"amount":1}`},
		{409, "insufficient_funds", "POST", "/wallets/a/withdrawals", `{"amount":6}`},
		{409, "insufficient_funds", "POST", "/transfers", `{"from":"a","to":"b","amount":6}`},
		{404, "wallet_not_found", "POST", "/transfers", `{"from":"a","to":"ghost","amount":1}`},
		{422, "same_wallet", "POST", "/transfers", `{"from":"a","to":"a","amount":1}`},
		{400, "invalid_amount", "POST", "/transfers", `{"from":"a","to":"b","amount":-1}`},
		{400, "bad_json", "POST", "/transfers", `[]`},
		{400, "bad_json", "POST", "/wallets/a/deposits", `null`},
		{400, "bad_json", "POST", "/wallets/a/withdrawals", ` null `},
		{400, "bad_json", "POST", "/transfers", `null`},
		{400, "bad_json", "POST", "/wallets", `null`},
		{404, "wallet_not_found", "GET", "/wallets/ghost", ``},
		{404, "wallet_not_found", "GET", "/balances/ghost", ``},
		{400, "invalid_wallet_id", "GET", "/balances/a%20b", ``},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.method, tc.path, tc.body), func(t *testing.T) {
			c := client{t, c.srv}
			c.expectError(tc.status, tc.code, tc.method, tc.path, tc.body)
		})
	}
	require.Equal(t, n, logLen(t, svc), "bad input appends nothing")
}

// Error details say the rule that was broken, in the client's characters:
// the wallet id's alphabet and length, a null body as not an object, and a
// non-ASCII character of an Idempotency-Key as itself (not its first byte
// read as Latin-1).
func TestHTTPErrorDetails(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	detail := func(status int, code, method, path, body string, hdr ...string) string {
		t.Helper()
		st, _, m := c.do(method, path, body, hdr...)
		require.Equal(t, status, st, "%v", m)
		require.Equal(t, code, m["code"])
		return m["detail"].(string)
	}
	require.Contains(t, detail(400, "invalid_wallet_id", "POST", "/wallets", `{"wallet_id":"has space"}`),
		"want 1..64 characters of A-Z, a-z, 0-9, '_', '.' and '-'")
	require.Contains(t, detail(400, "invalid_wallet_id", "GET", "/balances/a%20b", ""), "1..64 characters")
	require.Contains(t, detail(400, "bad_json", "POST", "/wallets/a/deposits", `null`), "must be a JSON object (got null)")
	d := detail(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", `"café"`)
	require.Contains(t, d, "character 'é' at byte 4 is not printable ASCII")
	require.NotContains(t, d, "Ã")
	d = detail(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", "café")
	require.Contains(t, d, "character 'é' at byte 3 is not allowed outside quotes")
	d = detail(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", "caf\xe9")
	require.Contains(t, d, "byte 0xe9 at byte 3")
}
