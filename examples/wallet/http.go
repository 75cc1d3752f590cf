package wallet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/google/uuid"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/cursor"
)

// NewAPI returns the wallet's HTTP JSON API:
//
//	POST /wallets                       {"wallet_id": "w1"}          201
//	POST /wallets/{id}/deposits         {"amount": 100}              200
//	POST /wallets/{id}/withdrawals      {"amount": 100}              200
//	POST /transfers                     {"from","to","amount"}       200
//	GET  /wallets/{id}                  balance from a decision read, ETag = cursor
//	GET  /balances/{id}                 balance from the read model (balances may be nil: 404)
//
// Command bodies must be Content-Type: application/json.
//
// Commands accept If-Match (RFC 9110 §13.1.1): "*" or a list of entity-tags,
// the ETags of GET /wallets/{id}. The command runs if the wallet (the source
// of a transfer) has not changed since any listed tag; weak tags never match
// (strong comparison) and a tag this API did not make matches nothing; 412
// otherwise. A request that would fail anyway (an unknown wallet, a bad body)
// gets that error instead.
//
// Idempotency-Key (a UUID, bare or as a quoted structured-field string)
// follows the IETF Idempotency-Key draft: the key is the command id, and a
// fingerprint of method, path and body (canonical JSON) is recorded with the
// command. A retry with the same request returns the first outcome with
// Idempotent-Replayed: true; the same key with another request is 422; a
// retry while the first is still running is 409. Errors are not recorded: a
// key whose request failed may be used again.
//
// Errors are {"error": "...", "code": "..."}: 400 bad_json, invalid_amount,
// invalid_wallet_id, bad_etag (malformed If-Match), bad_idempotency_key;
// 404 wallet_not_found, not_found (no such route); 405 method_not_allowed
// (with Allow); 409 wallet_exists, insufficient_funds, conflict (retries
// exhausted), idempotency_key_in_flight; 412 stale_etag; 413 body_too_large
// (bodies over MaxBodyBytes); 415 unsupported_media_type; 422 same_wallet,
// idempotency_key_reused; 500 internal; 503 unavailable, outcome_unknown (the
// command may or may not have been applied: retry with the same
// Idempotency-Key; with Retry-After).
func NewAPI(s *Service, balances *Balances) http.Handler {
	a := &api{s: s, b: balances, mux: http.NewServeMux()}
	a.mux.HandleFunc("POST /wallets", a.open)
	a.mux.HandleFunc("POST /wallets/{id}/deposits", a.deposit)
	a.mux.HandleFunc("POST /wallets/{id}/withdrawals", a.withdraw)
	a.mux.HandleFunc("POST /transfers", a.transfer)
	a.mux.HandleFunc("GET /wallets/{id}", a.get)
	a.mux.HandleFunc("GET /balances/{id}", a.balance)
	return a
}

// ServeHTTP routes the request; the router's own 404 and 405 answers get the
// API's JSON error shape (the 405 keeps its Allow header).
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, pattern := a.mux.Handler(r); pattern == "" {
		// No route: the mux answers 404 or 405 (with Allow); keep its status and
		// headers, replace its text body.
		rec := &headerRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeError(w, &httpError{status: http.StatusMethodNotAllowed, code: "method_not_allowed",
				msg: fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))})
			return
		}
		writeError(w, &httpError{status: http.StatusNotFound, code: "not_found", msg: "no such route: " + r.Method + " " + r.URL.Path})
		return
	}
	a.mux.ServeHTTP(w, r)
}

// headerRecorder keeps the status and headers a handler writes and drops its body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }

func (h *headerRecorder) Write(b []byte) (int, error) {
	h.WriteHeader(http.StatusOK)
	return len(b), nil
}

func (h *headerRecorder) WriteHeader(status int) {
	if h.status == 0 {
		h.status = status
	}
}

type api struct {
	s   *Service
	b   *Balances
	mux *http.ServeMux
}

// WalletResponse is the body of wallet responses.
type WalletResponse struct {
	WalletID      string `json:"wallet_id"`
	Balance       int64  `json:"balance"`
	CommandID     string `json:"command_id,omitempty"`
	TransactionID uint64 `json:"transaction_id,omitempty"`
	AsOf          string `json:"as_of,omitempty"`
}

// TransferRequest is the body of POST /transfers.
type TransferRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Amount int64  `json:"amount"`
}

// TransferResponse is the body of a transfer's response.
type TransferResponse struct {
	From          string `json:"from"`
	To            string `json:"to"`
	Amount        int64  `json:"amount"`
	FromBalance   int64  `json:"from_balance"`
	ToBalance     int64  `json:"to_balance"`
	TransferID    string `json:"transfer_id"`
	TransactionID uint64 `json:"transaction_id"`
}

// ErrorResponse is the body of every error.
type ErrorResponse struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

type httpError struct {
	status int
	code   string
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(code, msg string) error { return &httpError{http.StatusBadRequest, code, msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// outcomeUnknownMsg tells the client what to do about an unknown outcome.
const outcomeUnknownMsg = "the command may or may not have been applied (%v); " +
	"retry with the same Idempotency-Key to apply it once or get its outcome " +
	"(without a key, read the wallet before retrying)"

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{http.StatusInternalServerError, "internal", err.Error()}
		switch {
		// First: an unknown outcome may wrap a context or connection error.
		case errors.Is(err, pgdcb.ErrOutcomeUnknown):
			w.Header().Set("Retry-After", "1")
			he = &httpError{http.StatusServiceUnavailable, "outcome_unknown", fmt.Sprintf(outcomeUnknownMsg, err)}
		case errors.Is(err, ErrInvalidAmount):
			he = &httpError{http.StatusBadRequest, "invalid_amount", err.Error()}
		case errors.Is(err, ErrInvalidWalletID):
			he = &httpError{http.StatusBadRequest, "invalid_wallet_id", err.Error()}
		case errors.Is(err, ErrWalletNotFound):
			he = &httpError{http.StatusNotFound, "wallet_not_found", err.Error()}
		case errors.Is(err, ErrWalletExists):
			he = &httpError{http.StatusConflict, "wallet_exists", err.Error()}
		case errors.Is(err, ErrInsufficientFunds):
			he = &httpError{http.StatusConflict, "insufficient_funds", err.Error()}
		case errors.Is(err, ErrInFlight):
			he = &httpError{http.StatusConflict, "idempotency_key_in_flight", err.Error() + "; retry later with the same key"}
		case errors.Is(err, pgdcb.ErrConditionFailed):
			he = &httpError{http.StatusConflict, "conflict", err.Error()}
		case errors.Is(err, ErrStale):
			he = &httpError{http.StatusPreconditionFailed, "stale_etag", err.Error()}
		case errors.Is(err, ErrSameWallet):
			he = &httpError{http.StatusUnprocessableEntity, "same_wallet", err.Error()}
		case errors.Is(err, ErrKeyReused):
			he = &httpError{http.StatusUnprocessableEntity, "idempotency_key_reused", err.Error()}
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			he = &httpError{http.StatusServiceUnavailable, "unavailable", err.Error()}
		}
	}
	writeJSON(w, he.status, ErrorResponse{Error: he.msg, Code: he.code})
}

// MaxBodyBytes is the largest request body the API reads; a larger one gets
// 413 body_too_large.
const MaxBodyBytes = 1 << 16

// decode reads one JSON object, refusing unknown fields, trailing data and
// bodies over MaxBodyBytes (the whole body is read, so nothing past the
// object is silently ignored).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &httpError{http.StatusRequestEntityTooLarge, "body_too_large",
				fmt.Sprintf("request body over %d bytes", MaxBodyBytes)}
		}
		return badRequest("bad_json", "reading the body: "+err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("bad_json", "malformed JSON body: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("bad_json", "malformed JSON body: trailing data")
	}
	return nil
}

// checkContentType refuses a body that is not declared application/json
// (parameters such as charset are allowed).
func checkContentType(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return &httpError{http.StatusUnsupportedMediaType, "unsupported_media_type",
			fmt.Sprintf("request body must be Content-Type: application/json (got %q)", r.Header.Get("Content-Type"))}
	}
	return nil
}

// options reads If-Match and Idempotency-Key; req is the decoded body, part
// of the request's fingerprint.
func options(r *http.Request, req any) (*Options, error) {
	opt := &Options{}
	if vs, ok := r.Header["Idempotency-Key"]; ok {
		// An sf-string per the draft ("…"), or the bare UUID.
		k := strings.TrimSpace(strings.Join(vs, ","))
		if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
			k = k[1 : len(k)-1]
		}
		id, err := uuid.Parse(k)
		if err != nil || len(k) != 36 {
			return nil, badRequest("bad_idempotency_key", "Idempotency-Key must be one UUID, such as \"0190f5b2-8d3c-7cde-9a41-3f1e2d4c5b6a\"")
		}
		opt.CommandID = id
		opt.Fingerprint = fingerprint(r, req)
	}
	if vs, ok := r.Header["If-Match"]; ok {
		pre, err := parseIfMatch(strings.Join(vs, ","))
		if err != nil {
			return nil, badRequest("bad_etag", "malformed If-Match: "+err.Error())
		}
		opt.IfMatch = pre
	}
	return opt, nil
}

// fingerprint identifies a request: a hash of its method, path and body as
// canonical JSON (so spacing and key order do not count).
func fingerprint(r *http.Request, req any) string {
	body, _ := json.Marshal(req) // a decoded request always marshals
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	h.Write(body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// parseIfMatch parses an If-Match field value (RFC 9110 §13.1.1):
//
//	If-Match   = "*" / #entity-tag
//	entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc      = %x21 / %x23-7E / obs-text
//
// Several field lines are one comma-joined value; empty list elements are
// ignored. "*" gives nil (any current representation: the wallet's existence
// is checked anyway). Otherwise the precondition holds the strong tags that
// are cursors of this API: a weak tag never matches under the strong
// comparison, and another well-formed tag matches nothing, so both are
// dropped (an empty list never matches).
func parseIfMatch(v string) (*Precondition, error) {
	if strings.TrimSpace(v) == "*" {
		return nil, nil
	}
	pre := &Precondition{Cursors: []cursor.Cursor{}}
	i := 0
	skipOWS := func() {
		for i < len(v) && (v[i] == ' ' || v[i] == '\t') {
			i++
		}
	}
	for {
		// Empty elements: OWS and commas.
		for i < len(v) && (v[i] == ' ' || v[i] == '\t' || v[i] == ',') {
			i++
		}
		if i == len(v) {
			return pre, nil
		}
		weak := false
		switch {
		case v[i] == '*':
			return nil, errors.New(`"*" must be the only value`)
		case strings.HasPrefix(v[i:], `W/`):
			weak = true
			i += 2
		}
		if i == len(v) || v[i] != '"' {
			return nil, fmt.Errorf("entity-tag at byte %d does not start with a double quote", i)
		}
		i++
		start := i
		for i < len(v) && v[i] != '"' {
			if c := v[i]; c < 0x21 || c == 0x7f {
				return nil, fmt.Errorf("invalid character %q in entity-tag at byte %d", c, i)
			}
			i++
		}
		if i == len(v) {
			return nil, errors.New("unterminated entity-tag")
		}
		opaque := v[start:i]
		i++
		skipOWS()
		if i < len(v) && v[i] != ',' {
			return nil, fmt.Errorf("expected a comma after the entity-tag at byte %d", i)
		}
		if weak {
			continue
		}
		if c, err := cursor.Parse(opaque); err == nil {
			pre.Cursors = append(pre.Cursors, c)
		}
	}
}

func etag(c cursor.Cursor) string { return `"` + c.String() + `"` }

func (a *api) respond(w http.ResponseWriter, status int, res Result) {
	if res.Outcome.Duplicate {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, status, WalletResponse{
		WalletID: res.WalletID, Balance: res.Balance,
		CommandID: res.Outcome.CommandID.String(), TransactionID: res.Outcome.TransactionID,
	})
}

// commandRequest decodes a command's JSON body into req and reads its
// If-Match / Idempotency-Key options; on bad input it writes the error and
// returns false.
func commandRequest(w http.ResponseWriter, r *http.Request, req any) (*Options, bool) {
	if err := checkContentType(r); err != nil {
		writeError(w, err)
		return nil, false
	}
	if err := decode(w, r, req); err != nil {
		writeError(w, err)
		return nil, false
	}
	opt, err := options(r, req)
	if err != nil {
		writeError(w, err)
		return nil, false
	}
	return opt, true
}

func (a *api) open(w http.ResponseWriter, r *http.Request) {
	var req struct {
		WalletID string `json:"wallet_id"`
	}
	opt, ok := commandRequest(w, r, &req)
	if !ok {
		return
	}
	res, err := a.s.Open(r.Context(), req.WalletID, opt)
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Location", "/wallets/"+req.WalletID)
	a.respond(w, http.StatusCreated, res)
}

func (a *api) deposit(w http.ResponseWriter, r *http.Request)  { a.single(w, r, a.s.Deposit) }
func (a *api) withdraw(w http.ResponseWriter, r *http.Request) { a.single(w, r, a.s.Withdraw) }

func (a *api) single(w http.ResponseWriter, r *http.Request,
	do func(context.Context, string, int64, *Options) (Result, error)) {
	var req struct {
		Amount int64 `json:"amount"`
	}
	opt, ok := commandRequest(w, r, &req)
	if !ok {
		return
	}
	res, err := do(r.Context(), r.PathValue("id"), req.Amount, opt)
	if err != nil {
		writeError(w, err)
		return
	}
	a.respond(w, http.StatusOK, res)
}

func (a *api) transfer(w http.ResponseWriter, r *http.Request) {
	var req TransferRequest
	opt, ok := commandRequest(w, r, &req)
	if !ok {
		return
	}
	res, err := a.s.Transfer(r.Context(), req.From, req.To, req.Amount, opt)
	if err != nil {
		writeError(w, err)
		return
	}
	if res.Outcome.Duplicate {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusOK, TransferResponse{
		From: res.WalletID, To: res.ToWalletID, Amount: res.Amount,
		FromBalance: res.Balance, ToBalance: res.ToBalance,
		TransferID: res.Outcome.CommandID.String(), TransactionID: res.Outcome.TransactionID,
	})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	v, err := a.s.Wallet(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("ETag", etag(v.Cursor))
	writeJSON(w, http.StatusOK, WalletResponse{WalletID: v.WalletID, Balance: v.Balance, AsOf: v.Cursor.String()})
}

func (a *api) balance(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !ValidID(id) {
		writeError(w, ErrInvalidWalletID)
		return
	}
	if a.b == nil {
		writeError(w, &httpError{http.StatusNotFound, "no_read_model", "no balance read model configured"})
		return
	}
	bal, ok, err := a.b.Balance(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if !ok {
		writeError(w, ErrWalletNotFound)
		return
	}
	cp, err := a.b.Checkpoint(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, WalletResponse{WalletID: id, Balance: bal, AsOf: cp.String()})
}
