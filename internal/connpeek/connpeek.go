// Package connpeek looks at a client connection's socket without reading
// from it or writing to it: whether the server has closed it or sent
// something nobody asked for (a FATAL message before the backend exited),
// as a pooled PostgreSQL connection shows after a server restart or a
// pg_terminate_backend. One non-blocking system call, no round trip.
package connpeek

import "net"

// State is what Peek found.
type State int

const (
	// Unknown: the socket could not be looked at (another platform, a
	// connection type without a file descriptor).
	Unknown State = iota
	// Quiet: nothing to read, the socket is open. The usual state of an
	// idle PostgreSQL connection between calls.
	Quiet
	// Pending: bytes are waiting that nobody asked for, or the socket is
	// closed or failed: the connection is likely dead (a FATAL message, an
	// end of file), or carries an asynchronous message (a notice, a
	// parameter change, a notification). Ping it before use.
	Pending
)

// Peek looks at c's socket (the one below a *tls.Conn). It never blocks and
// never consumes bytes: it does not take the socket's read lock (a
// goroutine may be blocked reading it), it peeks with MSG_DONTWAIT.
func Peek(c net.Conn) State {
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = u.NetConn()
	}
	return peek(c)
}
