//go:build unix

package pgserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
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
		return nil, msg
	}
	cred, err := childCredential()
	if err != nil {
		o.log("no throwaway cluster", "err", err)
		return nil, "throwaway cluster impossible: " + err.Error()
	}
	var fails []string
	for _, b := range bins {
		o.log("starting throwaway cluster", "binaries", b.String())
		s, err := startCluster(ctx, o, b, cred)
		if err == nil {
			o.log("using throwaway cluster", "server", describe(s.dsn), "dir", s.dir)
			return s, ""
		}
		o.log("throwaway cluster failed", "binaries", b.String(), "err", err)
		fails = append(fails, fmt.Sprintf("%s: %v", b, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, "throwaway cluster failed with " + strings.Join(fails, "; ")
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
func startCluster(ctx context.Context, o *Options, b pgBin, cred *syscall.Credential) (_ *Server, err error) {
	ctx, cancel := context.WithTimeout(ctx, o.startTimeout(60*time.Second))
	defer cancel()

	dir, err := os.MkdirTemp(tempBase(cred), "pgdcb-pg-")
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

	initdb := exec.CommandContext(ctx, b.initdb, "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
	initdb.Dir = dir
	initdb.Env = childEnv()
	initdb.SysProcAttr = procAttr(cred)
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, tail(out))
	}

	// The port is picked by binding and releasing it, so another process may
	// take it first: retry a few times when postgres cannot bind.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, bindFailed, err := launch(ctx, b, dir, data, port, cred)
		if err == nil {
			return s, nil
		}
		if !bindFailed || attempt == 3 {
			return nil, err
		}
		o.log("port taken, retrying", "port", port)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts postgres and waits until it accepts connections.
func launch(ctx context.Context, b pgBin, dir, data string, port int, cred *syscall.Credential) (_ *Server, bindFailed bool, _ error) {
	logPath := filepath.Join(dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, false, err
	}
	cmd := exec.Command(b.postgres, "-D", data, "-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories=",
		"-c", "max_connections=100",
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
	)
	cmd.Dir = dir
	cmd.Env = childEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = procAttr(cred)
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, false, fmt.Errorf("starting postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown: the data is thrown away
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}

	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if ping(ctx, dsn, time.Second) == nil {
			break
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(logPath)
			bind := bytes.Contains(log, []byte("could not bind")) || bytes.Contains(log, []byte("already in use"))
			return nil, bind, fmt.Errorf("postgres exited at start-up: %s", tail(log))
		case <-ctx.Done():
			stop()
			log, _ := os.ReadFile(logPath)
			return nil, false, fmt.Errorf("postgres did not accept connections in time (%w): %s", ctx.Err(), tail(log))
		case <-tick.C:
		}
	}

	wd := startWatchdog(cmd.Process.Pid, dir)
	s := &Server{dsn: dsn, source: SourceThrowaway, dir: dir}
	s.closeFn = func() error {
		if wd != nil {
			_ = wd.Process.Kill()
		}
		stop()
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("pgserver: removing throwaway cluster: %w", err)
		}
		return nil
	}
	return s, false, nil
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
