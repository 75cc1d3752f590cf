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
	"log/slog"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	pgdcb "github.com/pgdcb/pgdcb"
	"github.com/pgdcb/pgdcb/commands"
	"github.com/pgdcb/pgdcb/cursor"
)

// NewAPI returns the wallet's HTTP JSON API:
//
//	POST /wallets                       {"wallet_id": "w1"}          201
//	POST /wallets/{id}/deposits         {"amount": 100}              200
//	POST /wallets/{id}/withdrawals      {"amount": 100}              200
//	POST /transfers                     {"from","to","amount"}       200
//	GET  /wallets/{id}                  balance from a decision read, ETag = cursor
//	GET  /balances/{id}                 balance from the read model (balances may be nil: 404), weak ETag
//
// GET /balances/{id} reads your writes: it answers once the read model holds
// every event of the wallet committed before the request (Balances.Balance),
// so a client that transferred and then asks sees its transfer, with no token
// to pass; as_of is the read model's checkpoint, at or after the wallet's
// last event (and at or after the cursor a command's response carries). When
// the read model does not get there within BalancesConfig.ReadWait: 503
// read_model_behind with Retry-After.
//
// Command bodies must be Content-Type: application/json.
//
// GET /wallets/{id} answers with the wallet's version as a strong ETag: the
// cursor of its last event (View.Version), which changes when, and only
// when, the wallet changes. With If-None-Match (RFC 9110 §13.1.2: "*" or a
// list of entity-tags, compared weakly) naming it, the answer is 304 Not
// Modified with the ETag and no body. GET /balances/{id} answers likewise
// with a weak ETag, W/ and the version of the wallet its balance is at (weak:
// as_of moves with other wallets' events); it is not sent while the wallet
// changes faster than the read can tell.
//
// Commands accept If-Match (RFC 9110 §13.1.1): "*" or a list of entity-tags.
// The command runs if the wallet's (the source of a transfer's) current ETag
// is one of them; weak tags never match (strong comparison) and a tag this
// API did not make matches nothing; 412 stale_etag otherwise. A request that
// would fail anyway (an unknown wallet, a bad body) gets that error instead.
//
// Idempotency-Key follows the IETF Idempotency-Key draft: the key is a
// structured-field string (quoted) or a bare token, 1..MaxIdempotencyKeyBytes
// printable ASCII characters; KeyCommandID maps it to the command id (a UUID
// key is the id itself). A key is kept IdempotencyKeyLifetime from its first
// use; after that the same key is a new request (run under another id). A
// fingerprint of method, path, If-Match and body (canonical JSON) is
// recorded with the command. A retry with the same
// request replays the first outcome with Idempotent-Replayed: true, a
// business rejection (404 wallet_not_found, 409 wallet_exists and
// insufficient_funds, 412 stale_etag, 400 invalid_amount from the decision)
// included: the withdrawal refused for want of funds stays refused after a
// deposit. The same key with another request is 422; a retry while the first
// is still running is 409. Errors that decided nothing (a conflict after
// every retry, 503) are not recorded: the key may be used again.
//
// Errors are RFC 9457 problem details (Content-Type: application/problem+json):
// {"type", "title", "status", "detail", "code"}, where type is
// ProblemTypePrefix+code and code is stable: 400 bad_json, invalid_amount,
// invalid_wallet_id, bad_etag (malformed If-Match or If-None-Match),
// bad_idempotency_key; 404 wallet_not_found, not_found (no such route),
// no_read_model; 405 method_not_allowed (with Allow); 409 wallet_exists,
// insufficient_funds, conflict (retries exhausted),
// idempotency_key_in_flight; 412 stale_etag; 413 body_too_large (bodies over
// MaxBodyBytes); 415 unsupported_media_type; 422 same_wallet,
// idempotency_key_reused; 500 internal (the cause is logged, not sent); 503
// unavailable, outcome_unknown (the command may or may not have been applied:
// retry with the same Idempotency-Key; with Retry-After).
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
	// Cursor is the log point of the transfer's last event (cursor.Parse
	// reads it): a read of the balances read model whose as_of is at or
	// after it reflects the transfer.
	Cursor string `json:"cursor,omitempty"`
}

// ProblemTypePrefix begins the type of every problem the API answers with;
// the code completes it ("tag:pgdcb.github.io,2026:wallet/insufficient_funds").
// It is a tag URI (RFC 4151): an identifier, not a page to fetch.
const ProblemTypePrefix = "tag:pgdcb.github.io,2026:wallet/"

// Problem is the body of every error: an RFC 9457 problem details object,
// sent as application/problem+json.
type Problem struct {
	// Type is ProblemTypePrefix + Code.
	Type string `json:"type"`
	// Title is the same for every problem of a Type.
	Title  string `json:"title"`
	Status int    `json:"status"`
	// Detail says what went wrong with this request, for a human.
	Detail string `json:"detail"`
	// Code is the stable code (an extension member), such as "insufficient_funds".
	Code string `json:"code"`
}

// problemTitles are the problems' titles by code.
var problemTitles = map[string]string{
	"bad_json":                  "Malformed request body",
	"invalid_amount":            "Invalid amount",
	"invalid_wallet_id":         "Invalid wallet id",
	"bad_etag":                  "Malformed entity-tag",
	"bad_idempotency_key":       "Malformed Idempotency-Key",
	"wallet_not_found":          "Wallet not found",
	"not_found":                 "No such route",
	"no_read_model":             "No read model",
	"method_not_allowed":        "Method not allowed",
	"wallet_exists":             "Wallet already exists",
	"insufficient_funds":        "Insufficient funds",
	"conflict":                  "Concurrent changes",
	"idempotency_key_in_flight": "Request with this Idempotency-Key in progress",
	"stale_etag":                "Wallet changed",
	"body_too_large":            "Request body too large",
	"unsupported_media_type":    "Unsupported media type",
	"same_wallet":               "Transfer to the same wallet",
	"idempotency_key_reused":    "Idempotency-Key reused",
	"internal":                  "Internal error",
	"unavailable":               "Service unavailable",
	"outcome_unknown":           "Outcome unknown",
	"read_model_behind":         "Read model behind",
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
		he = &httpError{http.StatusInternalServerError, "internal", "internal error (logged by the server)"}
		var replayed *ReplayedRejectionError
		if errors.As(err, &replayed) {
			w.Header().Set("Idempotent-Replayed", "true")
		}
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
		case errors.Is(err, ErrReadModelBehind):
			w.Header().Set("Retry-After", "1")
			he = &httpError{http.StatusServiceUnavailable, "read_model_behind", err.Error()}
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			he = &httpError{http.StatusServiceUnavailable, "unavailable", "the request was cancelled or timed out before it was decided"}
		default:
			slog.Error("wallet: internal error", "err", err)
		}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(he.status)
	_ = json.NewEncoder(w).Encode(Problem{Type: ProblemTypePrefix + he.code, Title: problemTitles[he.code],
		Status: he.status, Detail: he.msg, Code: he.code})
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
		return badRequest("bad_json", jsonProblem(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("bad_json", "the body has data after its JSON object")
	}
	// null decodes into a struct as nothing at all; it is not an object.
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return badRequest("bad_json", fmt.Sprintf("the body must be a JSON object (got %s)", bytes.TrimSpace(t)))
	}
	return nil
}

// jsonProblem says what is wrong with a body in the API's terms (field
// names and JSON types, never Go's).
func jsonProblem(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return "the body is empty; expected a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the body ends in the middle of its JSON object"
	case errors.As(err, &syntax):
		return fmt.Sprintf("the body is not valid JSON (at byte %d)", syntax.Offset)
	case errors.As(err, &typ):
		want := "a value of another type"
		switch typ.Type.Kind() {
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			want = "an integer in range"
		case reflect.String:
			want = "a string"
		case reflect.Struct, reflect.Map:
			want = "a JSON object"
		}
		if typ.Field == "" {
			return fmt.Sprintf("the body must be a JSON object (got %s)", typ.Value)
		}
		return fmt.Sprintf("field %q must be %s (got %s)", typ.Field, want, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	}
	return "the body is not a valid JSON object"
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

// MaxIdempotencyKeyBytes is the longest Idempotency-Key the API accepts.
const MaxIdempotencyKeyBytes = 255

// idempotencyKeySpace names the command ids of Idempotency-Keys that are
// not UUIDs (KeyCommandID).
var idempotencyKeySpace = uuid.MustParse("6f1c3b0e-5a8d-4c27-9e41-7d2b9a0c4e11")

// KeyCommandID is the command id of an Idempotency-Key: the key itself when
// it is a UUID (36 characters, any case), else the name-based UUID (version
// 5) of the key, so that two different keys never share an id. It is the
// key's first id: once its record expires (IdempotencyKeyLifetime) the key
// runs under the next id of a chain derived from it.
func KeyCommandID(key string) uuid.UUID {
	if len(key) == 36 {
		if id, err := uuid.Parse(key); err == nil {
			return id
		}
	}
	return uuid.NewSHA1(idempotencyKeySpace, []byte(key))
}

// parseIdempotencyKey reads the Idempotency-Key field value: a
// structured-field string (RFC 8941: quoted, with \" and \\ escapes) or,
// leniently, a bare run of visible ASCII; 1..MaxIdempotencyKeyBytes
// characters.
func parseIdempotencyKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		i := 1
		for ; i < len(v) && v[i] != '"'; i++ {
			c := v[i]
			if c == '\\' {
				if i+1 == len(v) || (v[i+1] != '"' && v[i+1] != '\\') {
					return "", errors.New(`a backslash may only escape " or \`)
				}
				i++
				c = v[i]
			} else if c < 0x20 || c > 0x7e {
				return "", fmt.Errorf("%s at byte %d is not printable ASCII", charAt(v, i), i)
			}
			b.WriteByte(c)
		}
		if i != len(v)-1 {
			return "", errors.New("the string must be one quoted string")
		}
		key = b.String()
	} else {
		for i := 0; i < len(v); i++ {
			if c := v[i]; c <= 0x20 || c > 0x7e || c == ',' {
				return "", fmt.Errorf("%s at byte %d is not allowed outside quotes", charAt(v, i), i)
			}
		}
		key = v
	}
	if key == "" || len(key) > MaxIdempotencyKeyBytes {
		return "", fmt.Errorf("the key must be 1..%d characters (got %d)", MaxIdempotencyKeyBytes, len(key))
	}
	return key, nil
}

// charAt names the character that starts at byte i of v: the whole
// UTF-8 character, quoted ('é', not the 'Ã' of its first byte), or the byte
// when it starts none.
func charAt(v string, i int) string {
	r, n := utf8.DecodeRuneInString(v[i:])
	if r == utf8.RuneError && n <= 1 {
		return fmt.Sprintf("byte 0x%02x", v[i])
	}
	return fmt.Sprintf("character %q", r)
}

// options reads If-Match and Idempotency-Key; req is the decoded body, part
// of the request's fingerprint.
func options(r *http.Request, req any) (*Options, error) {
	opt := &Options{}
	if vs, ok := r.Header["If-Match"]; ok {
		pre, err := parseIfMatch(strings.Join(vs, ","))
		if err != nil {
			return nil, badRequest("bad_etag", "malformed If-Match: "+err.Error())
		}
		opt.IfMatch = pre
	}
	if vs, ok := r.Header["Idempotency-Key"]; ok {
		if len(vs) != 1 {
			return nil, badRequest("bad_idempotency_key", "Idempotency-Key must be sent once")
		}
		key, err := parseIdempotencyKey(vs[0])
		if err != nil {
			return nil, badRequest("bad_idempotency_key", "malformed Idempotency-Key: "+err.Error()+
				`; send a string such as "order-1234" or a UUID`)
		}
		opt.CommandID = KeyCommandID(key)
		opt.Fingerprint = fingerprint(r, req)
	}
	return opt, nil
}

// fingerprint identifies a request: a hash of its method, path, If-Match
// (when sent) and body as canonical JSON (so spacing and key order do not
// count).
func fingerprint(r *http.Request, req any) string {
	body, _ := json.Marshal(req) // a decoded request always marshals
	h := sha256.New()
	fmt.Fprintf(h, "%s %s\n", r.Method, r.URL.Path)
	if vs, ok := r.Header["If-Match"]; ok {
		fmt.Fprintf(h, "If-Match: %s\n", strings.Join(vs, ","))
	}
	h.Write(body)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// entityTag is one entity-tag of an If-Match or If-None-Match list.
type entityTag struct {
	weak   bool
	opaque string
}

// parseETags parses an If-Match or If-None-Match field value (RFC 9110
// §13.1.1, §13.1.2):
//
//	field      = "*" / #entity-tag
//	entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE
//	etagc      = %x21 / %x23-7E / obs-text
//
// Several field lines are one comma-joined value; empty list elements are
// ignored. star reports "*".
func parseETags(v string) (tags []entityTag, star bool, err error) {
	if strings.TrimSpace(v) == "*" {
		return nil, true, nil
	}
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
			return tags, false, nil
		}
		weak := false
		switch {
		case v[i] == '*':
			return nil, false, errors.New(`"*" must be the only value`)
		case strings.HasPrefix(v[i:], `W/`):
			weak = true
			i += 2
		}
		if i == len(v) || v[i] != '"' {
			return nil, false, fmt.Errorf("entity-tag at byte %d does not start with a double quote", i)
		}
		i++
		start := i
		for i < len(v) && v[i] != '"' {
			if c := v[i]; c < 0x21 || c == 0x7f {
				return nil, false, fmt.Errorf("invalid character %q in entity-tag at byte %d", c, i)
			}
			i++
		}
		if i == len(v) {
			return nil, false, errors.New("unterminated entity-tag")
		}
		tags = append(tags, entityTag{weak: weak, opaque: v[start:i]})
		i++
		skipOWS()
		if i < len(v) && v[i] != ',' {
			return nil, false, fmt.Errorf("expected a comma after the entity-tag at byte %d", i)
		}
	}
}

// parseIfMatch parses an If-Match field value. "*" gives nil (any current
// representation: the wallet's existence is checked anyway). Otherwise the
// precondition holds the strong tags that are versions made by this API: a
// weak tag never matches under the strong comparison, and another
// well-formed tag matches nothing, so both are dropped (an empty list never
// matches).
func parseIfMatch(v string) (*Precondition, error) {
	tags, star, err := parseETags(v)
	if err != nil || star {
		return nil, err
	}
	pre := &Precondition{Versions: []cursor.Cursor{}}
	for _, t := range tags {
		if t.weak {
			continue
		}
		if c, err := cursor.Parse(t.opaque); err == nil {
			pre.Versions = append(pre.Versions, c)
		}
	}
	return pre, nil
}

// noneMatch reports whether an If-None-Match field value matches the current
// ETag (RFC 9110 §13.1.2: "*" matches any current representation; tags are
// compared weakly).
func noneMatch(v, current string) (bool, error) {
	tags, star, err := parseETags(v)
	if err != nil || star {
		return star, err
	}
	current = strings.TrimPrefix(current, "W/")
	for _, t := range tags {
		if `"`+t.opaque+`"` == current {
			return true, nil
		}
	}
	return false, nil
}

// notModified answers a GET whose If-None-Match names tag (the ETag header
// already set) with 304, or a malformed one with 400; it reports whether it
// answered.
func notModified(w http.ResponseWriter, r *http.Request, tag string) bool {
	vs, ok := r.Header["If-None-Match"]
	if !ok {
		return false
	}
	match, err := noneMatch(strings.Join(vs, ","), tag)
	if err != nil {
		w.Header().Del("ETag")
		writeError(w, badRequest("bad_etag", "malformed If-None-Match: "+err.Error()))
		return true
	}
	if match {
		w.WriteHeader(http.StatusNotModified)
	}
	return match
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
		Cursor: outcomeCursor(res.Outcome).String(),
	})
}

func (a *api) get(w http.ResponseWriter, r *http.Request) {
	v, err := a.s.Wallet(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	tag := etag(v.Version)
	w.Header().Set("ETag", tag)
	if notModified(w, r, tag) {
		return
	}
	writeJSON(w, http.StatusOK, WalletResponse{WalletID: v.WalletID, Balance: v.Balance, AsOf: v.Version.String()})
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
	bal, version, ok, err := a.b.balanceAt(r.Context(), id)
	if err != nil {
		writeError(w, err)
		return
	}
	if !ok {
		writeError(w, ErrWalletNotFound)
		return
	}
	if version != nil {
		// Weak: the body's as_of moves with other wallets' events.
		tag := "W/" + etag(*version)
		w.Header().Set("ETag", tag)
		if notModified(w, r, tag) {
			return
		}
	}
	cp, err := a.b.Checkpoint(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, WalletResponse{WalletID: id, Balance: bal, AsOf: cp.String()})
}

// outcomeCursor is the log point of a command's last event.
func outcomeCursor(o commands.Outcome) cursor.Cursor {
	c := cursor.Cursor{TransactionID: o.TransactionID}
	if n := len(o.Events); n > 0 {
		c.TransactionID, c.Position = o.Events[n-1].TransactionID, o.Events[n-1].Position
	}
	return c
}
