package wallet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

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
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
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
	require.NotEmpty(c.t, m["error"])
}

func newAPI(t *testing.T) (client, *wallet.Service, *wallet.Balances) {
	svc := newService(t)
	b := wallet.NewBalances(svc.Store(), nil)
	require.NoError(t, b.Setup(context.Background()))
	srv := httptest.NewServer(wallet.NewAPI(svc, b))
	t.Cleanup(srv.Close)
	return client{t, srv}, svc, b
}

func TestHTTPHappyPath(t *testing.T) {
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

	st, hdr, m = c.do("GET", "/wallets/a", "")
	require.Equal(t, 200, st)
	require.EqualValues(t, 50, m["balance"])
	require.NotEmpty(t, hdr.Get("ETag"))

	last, _, err := svc.Store().ReadLast(context.Background(), query.All())
	require.NoError(t, err)
	require.NoError(t, b.WaitFor(context.Background(), last.TransactionID, last.Position))
	st, _, m = c.do("GET", "/balances/b", "")
	require.Equal(t, 200, st)
	require.EqualValues(t, 40, m["balance"])
	require.NotEmpty(t, m["as_of"])
}

func TestHTTPETag(t *testing.T) {
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
	c.expectError(400, "bad_etag", "POST", "/wallets/a/deposits", `{"amount":10}`, "If-Match", `"!!not-a-cursor"`)
	require.Equal(t, n, logLen(t, svc))
	_, hdr, _ = c.do("GET", "/wallets/a", "")
	st, _, _ = c.do("POST", "/transfers", `{"from":"a","to":"b","amount":1}`, "If-Match", hdr.Get("ETag"))
	require.Equal(t, 200, st)
}

func TestHTTPIdempotencyKey(t *testing.T) {
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
	c.expectError(400, "bad_idempotency_key", "POST", "/wallets/a/deposits", `{"amount":7}`, "Idempotency-Key", "nope")

	// A replayed transfer reports the recorded amount, not the replay's.
	c.do("POST", "/wallets", `{"wallet_id":"b"}`)
	tkey := uuid.NewString()
	st, _, t1 := c.do("POST", "/transfers", `{"from":"a","to":"b","amount":3}`, "Idempotency-Key", tkey)
	require.Equal(t, 200, st)
	require.EqualValues(t, 3, t1["amount"])
	st, hdr, t2 := c.do("POST", "/transfers", `{"from":"a","to":"b","amount":5}`, "Idempotency-Key", tkey)
	require.Equal(t, 200, st)
	require.Equal(t, "true", hdr.Get("Idempotent-Replayed"))
	require.Equal(t, t1, t2)
}

func TestHTTPBadInput(t *testing.T) {
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
