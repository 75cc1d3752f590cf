package wallet

import "errors"

// Business rejections. Each maps to one HTTP status (see NewAPI).
var (
	ErrInvalidWalletID   = errors.New("wallet: invalid wallet id")
	ErrInvalidAmount     = errors.New("wallet: amount must be a positive integer")
	ErrWalletNotFound    = errors.New("wallet: unknown wallet")
	ErrWalletExists      = errors.New("wallet: wallet already exists")
	ErrInsufficientFunds = errors.New("wallet: insufficient funds")
	ErrSameWallet        = errors.New("wallet: transfer to the same wallet")
	// ErrStale: the wallet changed since the cursor the client sent (If-Match).
	ErrStale = errors.New("wallet: wallet changed since the given cursor")
	// ErrKeyReused: the command id (Idempotency-Key) was already used with a
	// different request (Options.Fingerprint).
	ErrKeyReused = errors.New("wallet: idempotency key already used for a different request")
	// ErrInFlight: a request with the same command id (Idempotency-Key) and a
	// Fingerprint is still executing.
	ErrInFlight = errors.New("wallet: a request with this idempotency key is still in flight")
)
