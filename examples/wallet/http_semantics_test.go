package wallet_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/examples/wallet"
	"github.com/pgdcb/pgdcb/memstore"
)

// raw sends a request and returns the status, headers and body as they came.
func (c client) raw(method, path string, hdr ...string) (int, http.Header, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, nil)
	require.NoError(c.t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.srv.Client().Do(req)
	require.NoError(c.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(c.t, err)
	return resp.StatusCode, resp.Header, string(b)
}

// A rejection is the first outcome too: a withdrawal refused for want of
// funds stays refused when retried with its key after a deposit (it used to
// execute), with Idempotent-Replayed; the key with another body is 422.
// Any string is a key.
func TestHTTPIdempotencyKeyReplaysRejections(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	for _, id := range []string{"alice", "bob"} {
		st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"`+id+`"}`)
		require.Equal(t, 201, st)
	}
	for _, key := range []string{uuid.NewString(), "my-key-1", `"order 1234, retry"`} {
		t.Run(key, func(t *testing.T) {
			c := client{t, c.srv}
			st, hdr, first := c.do("POST", "/wallets/alice/withdrawals", `{"amount":100000}`, "Idempotency-Key", key)
			require.Equal(t, 409, st)
			require.Equal(t, "insufficient_funds", first["code"])
			require.Empty(t, hdr.Get("Idempotent-Replayed"))
			st, _, _ = c.do("POST", "/wallets/alice/deposits", `{"amount":200000}`)
			require.Equal(t, 200, st)
			n := logLen(t, svc)
			st, hdr, again := c.do("POST", "/wallets/alice/withdrawals", `{"amount":100000}`, "Idempotency-Key", key)
			require.Equal(t, 409, st, "the first outcome is replayed: %v", again)
			require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
			require.Equal(t, first, again)
			require.Equal(t, n, logLen(t, svc), "the replay executes nothing")
			c.expectError(422, "idempotency_key_reused", "POST", "/wallets/alice/withdrawals", `{"amount":1}`, "Idempotency-Key", key)
			c.expectError(422, "idempotency_key_reused", "POST", "/wallets/alice/deposits", `{"amount":100000}`, "Idempotency-Key", key)
			// Draw alice back down for the next key.
			st, _, _ = c.do("POST", "/wallets/alice/withdrawals", `{"amount":200000}`)
			require.Equal(t, 200, st)
		})
	}
	// An unknown wallet stays unknown to the key that found it so; a stale
	// If-Match stays stale.
	key := "open-later"
	c.expectError(404, "wallet_not_found", "POST", "/wallets/carol/deposits", `{"amount":1}`, "Idempotency-Key", key)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"carol"}`)
	require.Equal(t, 201, st)
	st, hdr, m := c.do("POST", "/wallets/carol/deposits", `{"amount":1}`, "Idempotency-Key", key)
	require.Equal(t, 404, st, "%v", m)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	v, err := svc.Wallet(context.Background(), "carol")
	require.NoError(t, err)
	require.Zero(t, v.Balance)
}

// Keys are any printable string up to MaxIdempotencyKeyBytes, bare or as a
// structured-field string; distinct keys are distinct commands.
func TestHTTPIdempotencyKeyAnyString(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	long := strings.Repeat("k", wallet.MaxIdempotencyKeyBytes)
	for i, key := range []string{"my-key-1", "my-key-2", `"with space"`, `"esc \" and \\"`, long} {
		st, hdr, first := c.do("POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", key)
		require.Equal(t, 200, st, "%q: %v", key, first)
		require.Empty(t, hdr.Get("Idempotent-Replayed"), "%q is a key of its own", key)
		require.EqualValues(t, i+1, first["balance"])
		st, hdr, again := c.do("POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", key)
		require.Equal(t, 200, st)
		require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
		require.Equal(t, first, again)
	}
	for _, bad := range []string{long + "k", `""`, "two words", `"unterminated`, `"a"b`, `"bad \x escape"`, "a,b"} {
		c.expectError(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":1}`, "Idempotency-Key", bad)
	}
	require.Equal(t, wallet.KeyCommandID("0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a"), uuid.MustParse("0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a"))
	require.NotEqual(t, wallet.KeyCommandID("my-key-1"), wallet.KeyCommandID("my-key-2"))
}

// The ETag is the wallet's own version, strong: another wallet's change
// leaves it as it is; the wallet's change makes it new and the old one
// stale (412).
func TestHTTPETagIsTheWalletsVersion(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	for _, id := range []string{"alice", "bob"} {
		st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"`+id+`"}`)
		require.Equal(t, 201, st)
	}
	_, hdr, m := c.do("GET", "/wallets/alice", "")
	tag := hdr.Get("ETag")
	require.True(t, strings.HasPrefix(tag, `"`) && !strings.HasPrefix(tag, "W/"), "a strong entity-tag: %s", tag)
	require.Equal(t, `"`+m["as_of"].(string)+`"`, tag)
	st, _, _ := c.do("POST", "/wallets/bob/deposits", `{"amount":5}`)
	require.Equal(t, 200, st)
	_, hdr, _ = c.do("GET", "/wallets/alice", "")
	require.Equal(t, tag, hdr.Get("ETag"), "bob's deposit is not a change of alice")
	st, _, _ = c.do("POST", "/wallets/alice/deposits", `{"amount":5}`)
	require.Equal(t, 200, st)
	_, hdr, _ = c.do("GET", "/wallets/alice", "")
	require.NotEqual(t, tag, hdr.Get("ETag"))
	c.expectError(412, "stale_etag", "POST", "/wallets/alice/withdrawals", `{"amount":1}`, "If-Match", tag)
	st, _, _ = c.do("POST", "/wallets/alice/withdrawals", `{"amount":1}`, "If-Match", hdr.Get("ETag"))
	require.Equal(t, 200, st)
}

// If-None-Match with the current ETag (compared weakly) or "*" is 304 with
// the ETag and no body (RFC 9110 §13.1.2); an old one gets the wallet.
func TestHTTPIfNoneMatch(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	_, hdr, _ := c.do("GET", "/wallets/a", "")
	old := hdr.Get("ETag")
	st, _, _ = c.do("POST", "/wallets/a/deposits", `{"amount":5}`)
	require.Equal(t, 200, st)
	_, hdr, _ = c.do("GET", "/wallets/a", "")
	cur := hdr.Get("ETag")
	for _, inm := range []string{cur, "W/" + cur, "*", old + ", " + cur, `"x", W/` + cur} {
		for _, method := range []string{"GET", "HEAD"} {
			st, hdr, body := c.raw(method, "/wallets/a", "If-None-Match", inm)
			require.Equal(t, 304, st, "%s If-None-Match %s", method, inm)
			require.Equal(t, cur, hdr.Get("ETag"))
			require.Empty(t, body)
		}
	}
	st, hdr, body := c.raw("GET", "/wallets/a", "If-None-Match", old)
	require.Equal(t, 200, st)
	require.Equal(t, cur, hdr.Get("ETag"))
	require.Contains(t, body, `"balance":5`)
	st, _, _ = c.raw("GET", "/wallets/a", "If-None-Match", "not-quoted")
	require.Equal(t, 400, st)
	st, _, _ = c.raw("GET", "/wallets/ghost", "If-None-Match", "*")
	require.Equal(t, 404, st, "no current representation: * does not match")
}

// Errors are RFC 9457 problem details whose detail speaks JSON, not Go.
func TestHTTPProblemDetails(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	for _, body := range []string{`{"amount":"10"}`, `{"amount":1.5}`, `{"amount":1e30}`, `{"amount":{}}`, `[]`, `"x"`,
		`{"amount":1,"extra":2}`, `{"amount":`, ``, `{"amount" 1}`} {
		t.Run(body, func(t *testing.T) {
			c := client{t, c.srv}
			st, hdr, m := c.do("POST", "/wallets/a/deposits", body, "Content-Type", "application/json")
			require.Equal(t, 400, st)
			require.Equal(t, "application/problem+json", hdr.Get("Content-Type"))
			require.Equal(t, "bad_json", m["code"])
			require.Equal(t, wallet.ProblemTypePrefix+"bad_json", m["type"])
			require.EqualValues(t, 400, m["status"])
			d := m["detail"].(string)
			for _, goism := range []string{"Go ", "int64", "struct", "json:", "wallet."} {
				require.NotContains(t, d, goism)
			}
		})
	}
	_, _, m := c.do("POST", "/wallets/a/deposits", `{"amount":"10"}`)
	require.Equal(t, `field "amount" must be an integer in range (got string)`, m["detail"])
}

// On a store other than PostgreSQL's the rejection is recorded in the
// process, and replayed the same way.
func TestCommandIDReplaysRejectionOnMemstore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	svc, err := wallet.New(memstore.MustNew(nil), nil)
	require.NoError(t, err)
	_, err = svc.Open(ctx, "a", nil)
	require.NoError(t, err)
	opt := &wallet.Options{CommandID: uuid.New(), Fingerprint: "f"}
	_, err = svc.Withdraw(ctx, "a", 10, opt)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	_, err = svc.Deposit(ctx, "a", 10, nil)
	require.NoError(t, err)
	_, err = svc.Withdraw(ctx, "a", 10, opt)
	require.ErrorIs(t, err, wallet.ErrInsufficientFunds)
	var rep *wallet.ReplayedRejectionError
	require.ErrorAs(t, err, &rep)
	require.Equal(t, "insufficient_funds", rep.Code)
	_, err = svc.Withdraw(ctx, "a", 5, &wallet.Options{CommandID: opt.CommandID, Fingerprint: "g"})
	require.ErrorIs(t, err, wallet.ErrKeyReused)
	v, err := svc.Wallet(ctx, "a")
	require.NoError(t, err)
	require.EqualValues(t, 10, v.Balance)
}

// GET /balances/{id} sends a weak ETag: the version of the wallet its
// balance is at, the opaque part of /wallets/{id}'s strong ETag. If-None-Match
// naming it (or /wallets's ETag: weak comparison) is 304 while the wallet
// does not change, another wallet's change included; the wallet's change
// gets the new balance and a new ETag.
func TestHTTPBalancesETag(t *testing.T) {
	t.Parallel()
	c, _, _ := newAPI(t)
	for _, id := range []string{"a", "b"} {
		st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"`+id+`"}`)
		require.Equal(t, 201, st)
	}
	st, _, _ := c.do("POST", "/wallets/a/deposits", `{"amount":5}`)
	require.Equal(t, 200, st)
	_, hdr, _ := c.do("GET", "/wallets/a", "")
	strong := hdr.Get("ETag")
	st, hdr, m := c.do("GET", "/balances/a", "")
	require.Equal(t, 200, st, "%v", m)
	require.EqualValues(t, 5, m["balance"])
	tag := hdr.Get("ETag")
	require.Equal(t, "W/"+strong, tag)

	st, _, _ = c.do("POST", "/wallets/b/deposits", `{"amount":7}`)
	require.Equal(t, 200, st)
	for _, inm := range []string{tag, strong, "*", `"x", ` + tag} {
		st, hdr, body := c.raw("GET", "/balances/a", "If-None-Match", inm)
		require.Equal(t, 304, st, "If-None-Match %s: %s", inm, body)
		require.Equal(t, tag, hdr.Get("ETag"))
		require.Empty(t, body)
	}
	st, _, _ = c.do("POST", "/wallets/a/deposits", `{"amount":1}`)
	require.Equal(t, 200, st)
	st, hdr, body := c.raw("GET", "/balances/a", "If-None-Match", tag)
	require.Equal(t, 200, st)
	require.Contains(t, body, `"balance":6`)
	require.NotEqual(t, tag, hdr.Get("ETag"))
	require.True(t, strings.HasPrefix(hdr.Get("ETag"), `W/"`), hdr.Get("ETag"))
	st, hdr, _ = c.raw("GET", "/balances/a", "If-None-Match", "not-quoted")
	require.Equal(t, 400, st)
	require.Empty(t, hdr.Get("ETag"))
}

// An Idempotency-Key is kept wallet.IdempotencyKeyLifetime: once the first
// run's record is older (backdated here, not waited for), the same key is a
// new request: it runs again (another command id, a new balance), and is
// then kept anew (a retry replays the second run; another body is 422). A
// recorded rejection expires alike.
func TestHTTPIdempotencyKeyExpires(t *testing.T) {
	t.Parallel()
	c, svc, _ := newAPI(t)
	st, _, _ := c.do("POST", "/wallets", `{"wallet_id":"a"}`)
	require.Equal(t, 201, st)
	commandsTable := pgx.Identifier{svc.Store().Schema(), "commands"}.Sanitize()
	age := func(key string) {
		t.Helper()
		tag, err := svc.Store().Pool().Exec(context.Background(), `UPDATE `+commandsTable+
			` SET occurred_at = occurred_at - $2::interval WHERE command_id = $1`,
			wallet.KeyCommandID(key), (wallet.IdempotencyKeyLifetime + time.Minute).String())
		require.NoError(t, err)
		require.EqualValues(t, 1, tag.RowsAffected())
	}

	st, _, first := c.do("POST", "/wallets/a/deposits", `{"amount":10}`, "Idempotency-Key", "dep-1")
	require.Equal(t, 200, st)
	st, hdr, again := c.do("POST", "/wallets/a/deposits", `{"amount":10}`, "Idempotency-Key", "dep-1")
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"), "within the lifetime: a replay")
	require.Equal(t, first, again)

	age("dep-1")
	st, hdr, second := c.do("POST", "/wallets/a/deposits", `{"amount":10}`, "Idempotency-Key", "dep-1")
	require.Equal(t, 200, st, "%v", second)
	require.Empty(t, hdr.Get("Idempotent-Replayed"), "an expired key is a new request")
	require.EqualValues(t, 20, second["balance"])
	require.NotEqual(t, first["command_id"], second["command_id"])
	st, hdr, again = c.do("POST", "/wallets/a/deposits", `{"amount":10}`, "Idempotency-Key", "dep-1")
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"), "kept anew")
	require.Equal(t, second, again)
	c.expectError(422, "idempotency_key_reused", "POST", "/wallets/a/deposits", `{"amount":3}`, "Idempotency-Key", "dep-1")

	c.expectError(409, "insufficient_funds", "POST", "/wallets/a/withdrawals", `{"amount":1000}`, "Idempotency-Key", "wd-1")
	c.expectError(422, "idempotency_key_reused", "POST", "/wallets/a/withdrawals", `{"amount":5}`, "Idempotency-Key", "wd-1")
	age("wd-1")
	st, hdr, m := c.do("POST", "/wallets/a/withdrawals", `{"amount":5}`, "Idempotency-Key", "wd-1")
	require.Equal(t, 200, st, "%v", m)
	require.Empty(t, hdr.Get("Idempotent-Replayed"))
	require.EqualValues(t, 15, m["balance"])
}
