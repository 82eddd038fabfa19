package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// unixScheme prefixes a dashboard "URL" that is a Unix socket's path:
// how a process in a network namespace reaches a relay on the host,
// since a socket file is not bound to any network.
const unixScheme = "unix:"

// Relay forwards what is posted to its Unix socket to the dashboard: a
// lab's pods, each in its own network namespace, cannot reach a dashboard
// on the host's loopback, but they can reach a socket file.
type Relay struct {
	dir string
	srv *http.Server
	ln  net.Listener
}

// StartRelay listens on a new socket in a directory of its own and
// forwards every request to dashboardURL as it is (headers, token and all)
// but for its Host, which is dashboardURL's.
func StartRelay(dashboardURL string) (*Relay, error) {
	target, err := url.Parse(dashboardURL)
	if err != nil {
		return nil, fmt.Errorf("dashboard relay: %w", err)
	}
	dir, err := os.MkdirTemp("", "meshperf-live-")
	if err != nil {
		return nil, fmt.Errorf("dashboard relay: %w", err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "dashboard.sock"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("dashboard relay: %w", err)
	}
	// Requests go out addressed to the dashboard by its own URL, Host
	// included: the dashboard answers only to its own names, and the
	// publishers behind the socket name none (see transport).
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }}
	proxy.Transport = &http.Transport{ResponseHeaderTimeout: requestTimeout, DialContext: (&net.Dialer{Timeout: requestTimeout}).DialContext}
	r := &Relay{dir: dir, ln: ln, srv: &http.Server{Handler: proxy, ReadHeaderTimeout: requestTimeout}}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// URL is what a publisher is given to post through the relay.
func (r *Relay) URL() string { return unixScheme + r.ln.Addr().String() }

// Close stops the relay and removes its socket.
func (r *Relay) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := r.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = r.srv.Close()
	}
	return errors.Join(err, os.RemoveAll(r.dir))
}

// transport is how a publisher reaches rawURL: over TCP, or through a
// relay's socket for a unix: URL; base is the URL requests are made to.
func transport(rawURL string) (t http.RoundTripper, base string) {
	path, ok := strings.CutPrefix(rawURL, unixScheme)
	if !ok {
		return http.DefaultTransport, strings.TrimSuffix(rawURL, "/")
	}
	var d net.Dialer
	return &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return d.DialContext(ctx, "unix", path)
	}}, "http://dashboard"
}
