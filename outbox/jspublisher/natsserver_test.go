package jspublisher_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/pgdcb/pgdcb/internal/testing/await"
	"github.com/stretchr/testify/require"
)

// natsServer is a nats-server process of the test's own (own port, own store
// directory, JetStream on), which the test may kill and start again: the
// shared broker is never touched.
type natsServer struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// startNATS starts a throwaway nats-server, killed when the test ends. It
// skips the test when no nats-server binary is installed.
func startNATS(t testing.TB) *natsServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		t.Skip("nats-server is not installed: ", err)
	}
	s := &natsServer{t: t, bin: bin, port: closedPort(t), dir: t.TempDir()}
	s.start()
	t.Cleanup(func() { s.kill() })
	return s
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// start runs the server and returns once it accepts connections.
func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = os.Stderr, os.Stderr
	if !testing.Verbose() {
		s.cmd.Stdout, s.cmd.Stderr = nil, nil
	}
	require.NoError(s.t, s.cmd.Start())
	await.Until(s.t, 10*time.Second, func() (bool, string) {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), 100*time.Millisecond)
		if err != nil {
			return false, fmt.Sprintf("nats-server not listening: %v", err)
		}
		_ = c.Close()
		return true, ""
	})
}

// kill ends the server with SIGKILL (a crash: nothing is flushed or said
// goodbye to) and waits for it to exit.
func (s *natsServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	_ = s.cmd.Wait()
	s.cmd = nil
}
