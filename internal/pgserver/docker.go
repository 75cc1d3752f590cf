package pgserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// findDocker starts a container when a Docker engine answers.
func findDocker(ctx context.Context, o *Options) (*Server, string) {
	if o.NoDocker {
		return nil, "Docker not tried (disabled)"
	}
	hosts := dockerHosts(o)
	var misses []string
	engine := ""
	for _, h := range hosts {
		if err := dockerPing(ctx, h); err != nil {
			o.log("no Docker engine", "host", h, "err", err)
			misses = append(misses, fmt.Sprintf("%s (%s)", h, shortErr(err)))
			continue
		}
		engine = h
		break
	}
	if engine == "" {
		return nil, "no Docker engine at " + strings.Join(misses, " or ")
	}
	o.log("Docker engine answers, starting a container", "host", engine)
	s, err := startContainer(ctx, o)
	if err != nil {
		o.log("container failed", "err", err)
		return nil, fmt.Sprintf("Docker engine answers at %s but: %v", engine, err)
	}
	o.log("using container", "server", describe(s.dsn))
	return s, ""
}

// dockerHosts lists the engine addresses to probe: Options.DockerHost, else
// $DOCKER_HOST, else the system socket and the rootless / Docker Desktop
// sockets that exist.
func dockerHosts(o *Options) []string {
	if o.DockerHost != "" {
		return []string{o.DockerHost}
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return []string{h}
	}
	hosts := []string{"unix:///var/run/docker.sock"}
	var extra []string
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		extra = append(extra, filepath.Join(d, "docker.sock"))
	}
	if home, err := os.UserHomeDir(); err == nil {
		extra = append(extra, filepath.Join(home, ".docker", "run", "docker.sock"))
	}
	for _, p := range extra {
		if _, err := os.Stat(p); err == nil {
			hosts = append(hosts, "unix://"+p)
		}
	}
	return hosts
}

// dockerPing asks the engine at host for GET /_ping, quickly.
func dockerPing(ctx context.Context, host string) error {
	u, err := url.Parse(host)
	if err != nil {
		return err
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var base string
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		base = "http://docker"
	case "tcp", "http":
		base = "http://" + u.Host
	case "https":
		base = "https://" + u.Host
	default:
		return fmt.Errorf("unsupported Docker host scheme %q", u.Scheme)
	}
	ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/_ping", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /_ping: %s", resp.Status)
	}
	return nil
}
