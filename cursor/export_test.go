package cursor

// InvalidCursorError is the error type the external tests assert on.
type InvalidCursorError = invalidCursorError
