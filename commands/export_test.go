package commands

// UnsupportedStoreError is the error type the external tests assert on.
type UnsupportedStoreError = unsupportedStoreError
