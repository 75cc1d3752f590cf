package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/pgdcb/pgdcb/internal/pgserver"
	"github.com/pgdcb/pgdcb/internal/testing/pgtest"
	"github.com/pgdcb/pgdcb/internal/testing/syncbuf"
)

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url, body string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header}
	require.NoError(t, json.Unmarshal(raw, &a.body), "%s %s: body %q", method, url, raw)
	return a
}

// startRun runs walletd's run with args in the background, logging to logs,
// and returns the API's base URL once it serves, and the channel run's
// result comes on.
func startRun(ctx context.Context, t *testing.T, logs *syncbuf.Buffer, args ...string) (base string, done <-chan error) {
	t.Helper()
	addrc := make(chan string, 1)
	result := make(chan error, 1)
	go func() { result <- run(ctx, args, logs, func(addr string) { addrc <- addr }) }()
	select {
	case addr := <-addrc:
		return "http://" + addr, result
	case err := <-result:
		t.Fatalf("run returned before serving: %v\n%s", err, logs)
	case <-time.After(60 * time.Second):
		t.Fatalf("walletd did not start\n%s", logs)
	}
	return "", nil
}

// walletd's run serves the API over real HTTP on a schema it migrates itself,
// and on cancellation lets a request in flight finish before returning nil.
func TestRunServesAndShutsDownGracefully(t *testing.T) {
	t.Setenv(pgserver.EnvVar, pgtest.DSN(t))
	schema := pgtest.Schema(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := &syncbuf.Buffer{}
	// active signals each connection the server starts reading a request on.
	active := make(chan struct{}, 1000)
	connStateHook = func(_ net.Conn, st http.ConnState) {
		if st == http.StateActive {
			select {
			case active <- struct{}{}:
			default:
			}
		}
	}
	t.Cleanup(func() { connStateHook = nil })
	base, done := startRun(ctx, t, logs, "-addr", "127.0.0.1:0", "-schema", schema, "-shutdown-timeout", "20s")

	require.Equal(t, 201, call(t, "POST", base+"/wallets", `{"wallet_id":"alice"}`).status)
	require.Equal(t, 201, call(t, "POST", base+"/wallets", `{"wallet_id":"bob"}`).status)
	key := uuid.NewString()
	a := call(t, "POST", base+"/wallets/alice/deposits", `{"amount":100}`, "Idempotency-Key", key)
	require.Equal(t, 200, a.status)
	r := call(t, "POST", base+"/wallets/alice/deposits", `{"amount":100}`, "Idempotency-Key", key)
	require.Equal(t, 200, r.status)
	require.Equal(t, "true", r.header.Get("Idempotent-Replayed"))
	require.Equal(t, a.body, r.body)
	require.Equal(t, 422, call(t, "POST", base+"/wallets/alice/deposits", `{"amount":1}`, "Idempotency-Key", key).status)
	g := call(t, "GET", base+"/wallets/alice", "")
	require.Equal(t, 200, g.status)
	require.EqualValues(t, 100, g.body["balance"])
	etag := g.header.Get("ETag")
	require.Equal(t, 200, call(t, "POST", base+"/transfers", `{"from":"alice","to":"bob","amount":30}`, "If-Match", etag).status)
	stale := call(t, "POST", base+"/wallets/alice/withdrawals", `{"amount":1}`, "If-Match", etag)
	require.Equal(t, 412, stale.status)
	require.Equal(t, "stale_etag", stale.body["code"])
	nf := call(t, "GET", base+"/nope", "")
	require.Equal(t, 404, nf.status)
	require.Equal(t, "not_found", nf.body["code"])
	// One access log line per request: method, path, status, duration.
	require.Regexp(t, `(?m)^time=\S+ level=INFO msg=request method=GET path=/nope status=404 duration=\S+$`, logs.String())
	require.Regexp(t, `(?m)msg=request method=POST path=/wallets/alice/withdrawals status=412 duration=`, logs.String())
	require.Equal(t, 3, strings.Count(logs.String(), "path=/wallets/alice/deposits "), "one line per request")
	// The read model runs in the background. It tails the log, so any open
	// transaction on the shared server delays it (the horizon): the deadline
	// only bounds how long a failure takes to show (20 s failed under load).
	require.Eventually(t, func() bool {
		b := call(t, "GET", base+"/balances/bob", "")
		return b.status == 200 && b.body["balance"] == float64(30)
	}, 2*time.Minute, 50*time.Millisecond)

	// A request in flight (its body still arriving) when the server is told to
	// stop completes; run then returns nil.
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", base+"/wallets/alice/withdrawals", pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = int64(len(`{"amount":5}`))
	type result struct {
		resp *http.Response
		err  error
	}
	got := make(chan result, 1)
	for len(active) > 0 { // the earlier requests' signals
		<-active
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		got <- result{resp, err}
	}()
	_, err = pw.Write([]byte(`{"amount":`))
	require.NoError(t, err)
	// The server has the request in hand (it is reading the body): only
	// then is it "in flight" for a graceful shutdown. Awaited as a signal:
	// a sleep on a loaded machine may end before the server read a byte,
	// and shutdown would then rightly close the idle connection.
	select {
	case <-active:
	case <-time.After(60 * time.Second):
		t.Fatal("the server never started reading the request")
	}
	cancel()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "shutting down") }, 10*time.Second, 10*time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("run returned with a request in flight: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	_, err = pw.Write([]byte(`5}`))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	res := <-got
	require.NoError(t, res.err)
	defer res.resp.Body.Close()
	raw, _ := io.ReadAll(res.resp.Body)
	require.Equal(t, 200, res.resp.StatusCode, "%s", raw)
	require.Contains(t, string(raw), `"balance":65`)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after shutdown")
	}
	require.Contains(t, logs.String(), "walletd stopped")
	_, err = http.Get(base + "/wallets/alice")
	require.Error(t, err, "the listener is closed")
}

func TestRunUsage(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	require.ErrorIs(t, run(context.Background(), []string{"-h"}, &out, nil), flag.ErrHelp)
	require.Contains(t, out.String(), "-addr")
	require.Contains(t, out.String(), pgserver.EnvVar)
	require.ErrorIs(t, run(context.Background(), []string{"-nope"}, io.Discard, nil), errUsage)
	require.ErrorIs(t, run(context.Background(), []string{"extra"}, io.Discard, nil), errUsage)
}

// The built binary stops cleanly on SIGTERM, with exit status 0.
func TestWalletdBinarySIGTERM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "walletd")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	schema := pgtest.Schema(t)
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-schema", schema)
	cmd.Env = append(os.Environ(), pgserver.EnvVar+"="+pgtest.DSN(t))
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	addrRE := regexp.MustCompile(`addr=(http://\S+)`)
	var base string
	var log []string
	deadline := time.After(60 * time.Second)
	for base == "" {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "walletd exited: %s", strings.Join(log, "\n"))
			log = append(log, l)
			if m := addrRE.FindStringSubmatch(l); m != nil {
				base = m[1]
			}
		case <-deadline:
			t.Fatalf("walletd did not start: %s", strings.Join(log, "\n"))
		}
	}
	require.Equal(t, 201, call(t, "POST", base+"/wallets", `{"wallet_id":"w1"}`).status)
	require.Equal(t, 415, call(t, "POST", base+"/wallets/w1/deposits", `{"amount":1}`, "Content-Type", "text/plain").status)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	waited := make(chan error, 1)
	go func() {
		for l := range lines {
			log = append(log, l)
		}
		waited <- cmd.Wait()
	}()
	select {
	case err := <-waited:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("walletd exited with %v: %s", ee, strings.Join(log, "\n"))
		}
		require.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("walletd did not stop on SIGTERM")
	}
	require.Contains(t, strings.Join(log, "\n"), "walletd stopped")
}

// walletd with -read-dsn on a streaming standby: GET /wallets/{id} (a
// store.Project) reads there, appends go to the primary, and the commands
// decide in a transaction on the primary (the executor's). With the
// standby's replay paused, a deposit and a wallet opened meanwhile commit
// but do not show in the reads, a deposit to that wallet is accepted (the
// decision is not stale), and once replay resumes the reads show them. With
// reads on the primary the paused reads would show them at once, and the
// test fails.
func TestStandbyReadDSN(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pair, err := pgtest.StartPair(ctx, pgserver.Options{Settings: map[string]string{"synchronous_commit": "on"}}, pgserver.StandbyOptions{})
	if errors.Is(err, pgserver.ErrNoBinaries) {
		t.Skip(err)
	}
	require.NoError(t, err)
	defer pair.Close()
	t.Setenv(pgserver.EnvVar, pair.Primary.DSN())
	logs := &syncbuf.Buffer{}
	base, done := startRun(ctx, t, logs, "-addr", "127.0.0.1:0", "-schema", "wallet", "-read-dsn", pair.Standby.DSN())
	replayed := func() {
		t.Helper()
		sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
		defer scancel()
		require.NoError(t, pair.Sync(sctx))
	}
	require.Equal(t, 201, call(t, "POST", base+"/wallets", `{"wallet_id":"alice"}`).status)
	replayed()
	require.Equal(t, 200, call(t, "POST", base+"/wallets/alice/deposits", `{"amount":100}`).status)
	replayed()
	require.EqualValues(t, 100, call(t, "GET", base+"/wallets/alice", "").body["balance"])

	require.NoError(t, pair.Standby.PauseReplay(ctx))
	dep := call(t, "POST", base+"/wallets/alice/deposits", `{"amount":50}`)
	require.Equal(t, 200, dep.status, "decided on the paused standby, committed on the primary")
	require.EqualValues(t, 150, dep.body["balance"])
	require.Equal(t, 201, call(t, "POST", base+"/wallets", `{"wallet_id":"bob"}`).status)
	g := call(t, "GET", base+"/wallets/alice", "")
	require.Equal(t, 200, g.status)
	require.EqualValues(t, 100, g.body["balance"], "the read is the paused standby's: without the deposit")
	require.Equal(t, 404, call(t, "GET", base+"/wallets/bob", "").status, "the read is the paused standby's: bob not open yet")
	require.Equal(t, 200, call(t, "POST", base+"/wallets/bob/deposits", `{"amount":10}`).status,
		"decided on the primary, which has bob")

	require.NoError(t, pair.Standby.ResumeReplay(ctx))
	require.Eventually(t, func() bool {
		a := call(t, "GET", base+"/wallets/alice", "")
		b := call(t, "GET", base+"/wallets/bob", "")
		return a.status == 200 && a.body["balance"] == float64(150) && b.status == 200 && b.body["balance"] == float64(10)
	}, 30*time.Second, 10*time.Millisecond, "the standby shows the deposits and bob once it replays")
	cancel()
	require.NoError(t, <-done, "%s", logs)
}
