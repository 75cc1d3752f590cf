//go:build linux || darwin || freebsd || netbsd || openbsd

package connpeek

import (
	"errors"
	"net"
	"syscall"
)

func peek(c net.Conn) State {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return Unknown
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return Pending // closed
	}
	var (
		rerr error
		b    [1]byte
	)
	// Control, not Read: Read would wait for the socket's read lock.
	if err := raw.Control(func(fd uintptr) {
		_, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return Pending // closed
	}
	switch {
	case errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK):
		return Quiet
	case errors.Is(rerr, syscall.EINTR):
		return Unknown
	case rerr != nil:
		return Pending // reset, …
	default:
		return Pending // n > 0: bytes waiting; n == 0: end of file
	}
}
