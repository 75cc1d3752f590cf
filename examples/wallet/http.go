package wallet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
// Commands accept If-Match (the ETag of GET /wallets/{id}): 412 if the wallet
// changed since. Idempotency-Key (a UUID) makes a command idempotent: a replay
// returns the first outcome with the header Idempotent-Replayed: true.
//
// Errors are {"error": "...", "code": "..."}: 400 bad_json, invalid_amount,
// invalid_wallet_id, bad_etag, bad_idempotency_key; 404 wallet_not_found;
// 409 wallet_exists, insufficient_funds, conflict (retries exhausted);
// 412 stale_etag; 413 body_too_large (bodies over MaxBodyBytes); 422
// same_wallet; 500 internal.
func NewAPI(s *Service, balances *Balances) http.Handler {
	a := &api{s: s, b: balances}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /wallets", a.open)
	mux.HandleFunc("POST /wallets/{id}/deposits", a.deposit)
	mux.HandleFunc("POST /wallets/{id}/withdrawals", a.withdraw)
	mux.HandleFunc("POST /transfers", a.transfer)
	mux.HandleFunc("GET /wallets/{id}", a.get)
	mux.HandleFunc("GET /balances/{id}", a.balance)
	return mux
}

type api struct {
	s *Service
	b *Balances
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

func writeError(w http.ResponseWriter, err error) {
	var he *httpError
	if !errors.As(err, &he) {
		he = &httpError{http.StatusInternalServerError, "internal", err.Error()}
		switch {
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
		case errors.Is(err, pgdcb.ErrConditionFailed):
			he = &httpError{http.StatusConflict, "conflict", err.Error()}
		case errors.Is(err, ErrStale):
			he = &httpError{http.StatusPreconditionFailed, "stale_etag", err.Error()}
		case errors.Is(err, ErrSameWallet):
			he = &httpError{http.StatusUnprocessableEntity, "same_wallet", err.Error()}
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

// options reads If-Match and Idempotency-Key.
func options(r *http.Request) (*Options, error) {
	opt := &Options{}
	if k := r.Header.Get("Idempotency-Key"); k != "" {
		id, err := uuid.Parse(k)
		if err != nil {
			return nil, badRequest("bad_idempotency_key", "Idempotency-Key must be a UUID")
		}
		opt.CommandID = id
	}
	if m := strings.TrimSpace(r.Header.Get("If-Match")); m != "" && m != "*" {
		c, err := cursor.Parse(strings.Trim(m, `"`))
		if err != nil {
			return nil, badRequest("bad_etag", "If-Match is not an ETag of this API: "+err.Error())
		}
		opt.IfMatch = &c
	}
	return opt, nil
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
	if err := decode(w, r, req); err != nil {
		writeError(w, err)
		return nil, false
	}
	opt, err := options(r)
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
