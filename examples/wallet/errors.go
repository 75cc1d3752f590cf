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
)
