//go:build unix

package pgserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// pgBin is one PostgreSQL installation able to make a cluster.
type pgBin struct {
	initdb, postgres string
	version          string // as printed by initdb --version, e.g. "15.20"
	major, minor     int
}

func (b pgBin) String() string {
	return fmt.Sprintf("PostgreSQL %s (%s)", b.version, filepath.Dir(b.initdb))
}

const defaultBinPlaces = "PATH or /usr/lib/postgresql/*/bin"

// findThrowaway makes a cluster from the newest local binaries that work.
func findThrowaway(ctx context.Context, o *Options) (*Server, string) {
	if o.NoThrowaway {
		return nil, "throwaway cluster not tried (disabled)"
	}
	s, why, _ := tryThrowaway(ctx, o)
	return s, why
}

// tryThrowaway makes a cluster from the newest local binaries that work; it
// says why not otherwise, and whether it was for want of binaries.
func tryThrowaway(ctx context.Context, o *Options) (_ *Server, why string, noBinaries bool) {
	bins, notes := findBins(ctx, o)
	if len(bins) == 0 {
		places := defaultBinPlaces
		if o.BinDirs != nil {
			places = strings.Join(o.BinDirs, ", ")
			if places == "" {
				places = "(no directories)"
			}
		}
		msg := "no initdb found in " + places
		if len(notes) > 0 {
			msg += " (" + strings.Join(notes, "; ") + ")"
		}
		o.log("no throwaway cluster", "why", msg)
		return nil, msg, true
	}
	settings, err := settingArgs(o.Settings)
	if err != nil {
		return nil, "throwaway cluster impossible: " + err.Error(), false
	}
	cred, err := childCredential()
	if err != nil {
		o.log("no throwaway cluster", "err", err)
		return nil, "throwaway cluster impossible: " + err.Error(), false
	}
	var fails []string
	for _, b := range bins {
		o.log("starting throwaway cluster", "binaries", b.String())
		s, err := startCluster(ctx, o, b, cred, settings)
		if err == nil {
			o.log("using throwaway cluster", "server", describe(s.dsn), "dir", s.dir)
			return s, "", false
		}
		o.log("throwaway cluster failed", "binaries", b.String(), "err", err)
		fails = append(fails, fmt.Sprintf("%s: %v", b, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "throwaway cluster failed with " + strings.Join(fails, "; "), false
}

var settingNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_.]*$`)

// settingArgs renders Options.Settings as postgres arguments, sorted by name.
func settingArgs(m map[string]string) ([]string, error) {
	names := make([]string, 0, len(m))
	for k := range m {
		if !settingNameRE.MatchString(k) {
			return nil, fmt.Errorf("Options.Settings: %q is not a setting name", k)
		}
		names = append(names, k)
	}
	sort.Strings(names)
	var args []string
	for _, k := range names {
		args = append(args, "-c", k+"="+m[k])
	}
	return args, nil
}

var versionRE = regexp.MustCompile(`(\d+)(?:\.(\d+))?`)

// findBins lists the installations found in the search directories, newest
// first, without duplicates (a PATH symlink and its target count once).
func findBins(ctx context.Context, o *Options) (bins []pgBin, notes []string) {
	dirs := o.BinDirs
	if dirs == nil {
		dirs = filepath.SplitList(os.Getenv("PATH"))
		lib, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		dirs = append(dirs, lib...)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		initdb := filepath.Join(d, "initdb")
		if !isExecutable(initdb) {
			continue
		}
		real, err := filepath.EvalSymlinks(initdb)
		if err != nil {
			continue
		}
		if seen[real] {
			continue
		}
		seen[real] = true
		postgres := filepath.Join(filepath.Dir(real), "postgres")
		if !isExecutable(postgres) {
			postgres = filepath.Join(d, "postgres")
		}
		if !isExecutable(postgres) {
			notes = append(notes, fmt.Sprintf("%s has no postgres binary beside it", initdb))
			continue
		}
		vctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		out, err := exec.CommandContext(vctx, real, "--version").Output()
		cancel()
		if err != nil {
			notes = append(notes, fmt.Sprintf("%s --version: %v", initdb, err))
			continue
		}
		b := pgBin{initdb: real, postgres: postgres}
		// "initdb (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
		line := strings.TrimSpace(string(out))
		if i := strings.Index(line, ")"); i >= 0 {
			line = line[i+1:]
		}
		if m := versionRE.FindStringSubmatch(line); m != nil {
			b.major, _ = strconv.Atoi(m[1])
			b.minor, _ = strconv.Atoi(m[2])
			b.version = m[0]
		} else {
			b.version = "unknown version"
		}
		bins = append(bins, b)
	}
	sort.SliceStable(bins, func(i, j int) bool {
		if bins[i].major != bins[j].major {
			return bins[i].major > bins[j].major
		}
		return bins[i].minor > bins[j].minor
	})
	return bins, notes
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// childCredential returns nil when the children may run as the current user,
// or the credential of the postgres OS user when running as root (initdb and
// postgres refuse to run as root).
func childCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and initdb refuses root, but there is no 'postgres' OS user to run it as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("running as root: cannot use uid %q gid %q of OS user postgres", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// tempBase is where the cluster's directory goes: the usual temp directory,
// unless running as root and the postgres user could not reach it.
func tempBase(cred *syscall.Credential) string {
	base := os.TempDir()
	if cred == nil {
		return base
	}
	for d := base; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
		if d == filepath.Dir(d) {
			return base
		}
	}
}

// childEnv is the environment of initdb and postgres: ours, without libpq
// variables that could redirect them, in the C locale so that messages can be
// matched.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C", "LANG=C")
}

func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	if cred == nil {
		return nil
	}
	return &syscall.SysProcAttr{Credential: cred}
}

// startCluster runs initdb in a new temporary directory and starts postgres
// on a free port of 127.0.0.1.
func startCluster(ctx context.Context, o *Options, b pgBin, cred *syscall.Credential, settings []string) (*Server, error) {
	return newCluster(ctx, o, "pgdcb-pg-", b, cred, settings, o.startTimeout(60*time.Second),
		func(ctx context.Context, dir, data string) error {
			return runChild(ctx, dir, cred, b.initdb, "-D", data, "-U", "postgres",
				"-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
		})
}

// newCluster makes a throwaway cluster in a new temporary directory (named
// after prefix) and starts it on a free port of 127.0.0.1, within timeout
// (which also bounds its later starts): makeData makes its data directory
// data (initdb, or a standby's base backup) in dir, as the postgres user
// when this process runs as root (cred). The directory is removed on
// failure.
func newCluster(ctx context.Context, o *Options, prefix string, b pgBin, cred *syscall.Credential, settings []string,
	timeout time.Duration, makeData func(ctx context.Context, dir, data string) error) (_ *Server, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	dir, err := os.MkdirTemp(tempBase(cred), prefix)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("chown %s to the postgres user: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")
	if err := makeData(ctx, dir, data); err != nil {
		return nil, err
	}

	// The port is picked by binding and releasing it, so another process may
	// take it first: retry a few times when postgres cannot bind.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c := &cluster{bin: b, dir: dir, data: data, port: port, cred: cred,
			settings: settings, startTimeout: timeout}
		bindFailed, err := c.launch(ctx)
		if err == nil {
			s := &Server{dsn: c.dsn(), source: SourceThrowaway, dir: dir, ctl: c}
			s.closeFn = c.close
			return s, nil
		}
		if !bindFailed || attempt == 3 {
			return nil, err
		}
		o.log("port taken, retrying", "port", port)
	}
}

// runChild runs the PostgreSQL program bin (initdb, pg_basebackup) in dir,
// as the postgres user when cred is set; its error carries the end of the
// program's output.
func runChild(ctx context.Context, dir string, cred *syscall.Credential, bin string, args ...string) error {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.SysProcAttr = procAttr(cred)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", filepath.Base(bin), err, tail(out))
	}
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cluster is a throwaway cluster's directory and its running postmaster.
type cluster struct {
	bin          pgBin
	dir, data    string
	port         int
	cred         *syscall.Credential
	settings     []string
	startTimeout time.Duration

	mu     sync.Mutex
	proc   *os.Process   // the postmaster; nil when stopped
	exited chan struct{} // closed when proc has exited
	wd     *exec.Cmd     // the watchdog of proc
	closed bool
}

func (c *cluster) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

func (c *cluster) dataDir() string { return c.data }

func (c *cluster) owner() (uid, gid int) {
	if c.cred == nil {
		return os.Getuid(), os.Getgid()
	}
	return int(c.cred.Uid), int(c.cred.Gid)
}

func (c *cluster) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

func (c *cluster) crash(ctx context.Context) error {
	return c.halt(ctx, "Crash", syscall.SIGQUIT, 10*time.Second)
}

func (c *cluster) stop(ctx context.Context) error {
	return c.halt(ctx, "Stop", syscall.SIGINT, 60*time.Second)
}

// halt sends sig to the postmaster and waits for it to exit, killing it
// after grace (or when ctx ends).
func (c *cluster) halt(ctx context.Context, op string, sig syscall.Signal, grace time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return fmt.Errorf("pgserver: %s: the cluster was closed", op)
	}
	if c.proc == nil {
		return fmt.Errorf("pgserver: %s: the cluster is not running", op)
	}
	c.stopWatchdog()
	err := c.signalAndWait(ctx, sig, grace)
	c.proc, c.exited = nil, nil
	if err != nil {
		return fmt.Errorf("pgserver: %s: %w", op, err)
	}
	return nil
}

// signalAndWait sends sig to the postmaster and waits for it to exit; after
// grace, or when ctx ends, it kills it. Called with c.mu held.
func (c *cluster) signalAndWait(ctx context.Context, sig syscall.Signal, grace time.Duration) error {
	select {
	case <-c.exited:
		return nil // it had exited by itself
	default:
	}
	if err := c.proc.Signal(sig); err != nil {
		return fmt.Errorf("signalling the postmaster: %w", err)
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.exited:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	_ = c.proc.Kill()
	<-c.exited
	if ctx.Err() != nil {
		return fmt.Errorf("postmaster killed: %w", ctx.Err())
	}
	return fmt.Errorf("postmaster did not exit within %s after %v; killed", grace, sig)
}

func (c *cluster) stopWatchdog() {
	if c.wd != nil {
		_ = c.wd.Process.Kill()
		c.wd = nil
	}
}

func (c *cluster) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.startTimeout)
	defer cancel()
	c.mu.Lock()
	running := c.proc != nil
	closed := c.closed
	c.mu.Unlock()
	switch {
	case closed:
		return errors.New("pgserver: Start: the cluster was closed")
	case running:
		return errors.New("pgserver: Start: the cluster is already running")
	}
	if _, err := c.launch(ctx); err != nil {
		return fmt.Errorf("pgserver: Start: %w", err)
	}
	return nil
}

// close stops the cluster (immediately: its data is thrown away) and removes
// its directory.
func (c *cluster) close() error {
	c.mu.Lock()
	c.closed = true
	c.stopWatchdog()
	if c.proc != nil {
		_ = c.signalAndWait(context.Background(), syscall.SIGQUIT, 10*time.Second)
		c.proc, c.exited = nil, nil
	}
	c.mu.Unlock()
	if err := os.RemoveAll(c.dir); err != nil {
		return fmt.Errorf("pgserver: removing throwaway cluster: %w", err)
	}
	return nil
}

// launch starts postgres and waits until it accepts connections.
func (c *cluster) launch(ctx context.Context) (bindFailed bool, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		return false, errors.New("already running")
	}
	logPath := filepath.Join(c.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	logStart, _ := logf.Seek(0, io.SeekEnd)
	args := []string{"-D", c.data, "-p", strconv.Itoa(c.port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=100",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	}
	cmd := exec.Command(c.bin.postgres, append(args, c.settings...)...)
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = procAttr(c.cred)
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return false, fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	c.proc, c.exited = cmd.Process, exited
	// startLog is what this start wrote to the log (older starts' lines are
	// no help in an error message).
	startLog := func() []byte {
		b, _ := os.ReadFile(logPath)
		if int64(len(b)) >= logStart {
			b = b[logStart:]
		}
		return b
	}

	dsn := c.dsn()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(ctx, dsn, time.Second) == nil {
			break
		}
		select {
		case <-exited:
			c.proc, c.exited = nil, nil
			log := startLog()
			bind := bytes.Contains(log, []byte("could not bind")) || bytes.Contains(log, []byte("already in use"))
			return bind, fmt.Errorf("postgres exited at start-up: %s", tail(log))
		case <-ctx.Done():
			_ = c.signalAndWait(context.Background(), syscall.SIGQUIT, 10*time.Second)
			c.proc, c.exited = nil, nil
			return false, fmt.Errorf("postgres did not accept connections in time (%w): %s", ctx.Err(), tail(startLog()))
		case <-tick.C:
		}
	}
	c.wd = startWatchdog(cmd.Process.Pid, c.dir)
	return false, nil
}

// watchdogScript stops the cluster and removes its directory once the process
// that started it is gone, for programs that exit without calling Close
// (a test binary has no hook at exit unless it has a TestMain).
const watchdogScript = `parent=$1 pg=$2 dir=$3
while kill -0 "$parent" 2>/dev/null; do sleep 1; done
kill -QUIT "$pg" 2>/dev/null
i=0
while kill -0 "$pg" 2>/dev/null && [ $i -lt 10 ]; do sleep 1; i=$((i+1)); done
kill -KILL "$pg" 2>/dev/null
rm -rf "$dir"
`

// startWatchdog runs watchdogScript in its own process group (so that a ^C
// meant for the program does not kill it before it cleans up). It returns nil
// if no shell can be run; Close still cleans up then.
func startWatchdog(pgPid int, dir string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", watchdogScript, "pgdcb-watchdog",
		strconv.Itoa(os.Getpid()), strconv.Itoa(pgPid), dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil
	}
	go func() { _ = cmd.Wait() }()
	return cmd
}

// tail returns the last lines of a child's output, for error messages.
func tail(out []byte) string {
	s := strings.TrimSpace(string(out))
	lines := strings.Split(s, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	s = strings.Join(lines, " | ")
	if s == "" {
		return "(no output)"
	}
	return s
}
