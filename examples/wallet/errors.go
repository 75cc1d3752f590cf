package wallet

import (
	"errors"
	"fmt"
)

// Business rejections. Each maps to one HTTP status (see NewAPI).
var (
	ErrInvalidWalletID   = errors.New("wallet: invalid wallet id: want 1..64 characters of A-Z, a-z, 0-9, '_', '.' and '-'")
	ErrInvalidAmount     = errors.New("wallet: amount must be a positive integer")
	ErrWalletNotFound    = errors.New("wallet: unknown wallet")
	ErrWalletExists      = errors.New("wallet: wallet already exists")
	ErrInsufficientFunds = errors.New("wallet: insufficient funds")
	ErrSameWallet        = errors.New("wallet: transfer to the same wallet")
	// ErrStale: the wallet's version is not one the client sent (If-Match).
	ErrStale = errors.New("wallet: the wallet changed since the given version (ETag)")
	// ErrKeyReused: the command id (Idempotency-Key) was already used with a
	// different request (Options.Fingerprint).
	ErrKeyReused = errors.New("wallet: idempotency key already used for a different request")
	// ErrInFlight: a request with the same command id (Idempotency-Key) and a
	// Fingerprint is still executing.
	ErrInFlight = errors.New("wallet: a request with this idempotency key is still in flight")
)

// rejections are the business rejections recorded under a command id and
// replayed (Options.CommandID), by their stable code (the HTTP API's).
var rejections = []struct {
	code string
	err  error
}{
	{"wallet_not_found", ErrWalletNotFound},
	{"wallet_exists", ErrWalletExists},
	{"insufficient_funds", ErrInsufficientFunds},
	{"stale_etag", ErrStale},
	{"invalid_amount", ErrInvalidAmount},
}

// RejectionCode returns the stable code of a business rejection ("" for any
// other error, such as a conflict, an unknown outcome or a corrupt wallet,
// which are never recorded: a retry decides again).
func RejectionCode(err error) string {
	for _, r := range rejections {
		if errors.Is(err, r.err) {
			return r.code
		}
	}
	return ""
}

// rejectionErr returns the sentinel of a rejection code.
func rejectionErr(code string) error {
	for _, r := range rejections {
		if r.code == code {
			return r.err
		}
	}
	return fmt.Errorf("wallet: recorded rejection %q", code)
}

// ReplayedRejectionError is the business rejection recorded by the first run
// of a command id, returned to a retry with the same id (the HTTP API adds
// Idempotent-Replayed: true). It unwraps to the rejection's sentinel
// (ErrInsufficientFunds, ...).
type ReplayedRejectionError struct {
	// Code is the rejection's stable code, such as "insufficient_funds".
	Code string
	// Detail is the first run's error text.
	Detail string
	// Err is the sentinel of Code.
	Err error
}

func (e *ReplayedRejectionError) Error() string { return e.Detail }

// Unwrap returns the rejection's sentinel.
func (e *ReplayedRejectionError) Unwrap() error { return e.Err }
