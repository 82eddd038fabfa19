// Package echo is the server every meshperf benchmark targets: an HTTP/1.1 and
// h2c echo server that honours Fortio's echo query parameters (delay, status,
// size, close, header, gzip), a TCP echo server, and a gRPC server with the
// standard health service and Fortio's ping service. Because benchmarks
// compare load generators and meshes by the latency and CPU they add, the
// server's own cost per request is kept as small as we can make it: no
// per-request logging, parsed query plans cached, shared payload bytes.
package echo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"
)

// Fortio's defaults, kept so that benchmark URLs behave the same against
// either server.
const (
	// DefaultMaxDelay is Fortio's -max-echo-delay default: 1.5s, just above
	// Envoy's default 1s route timeout so that timeouts can be tested.
	DefaultMaxDelay = 1500 * time.Millisecond
	// DefaultMaxPayloadBytes is Fortio's -maxpayloadsizekb default (256 KiB).
	DefaultMaxPayloadBytes = 256 * 1024
	// DefaultIdleTimeout is Fortio's -server-idle-timeout default.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultDebugPath is Fortio's -echo-debug-path default.
	DefaultDebugPath = "/debug"
	// DefaultHealthService is the gRPC health service name Fortio reports
	// SERVING (besides ""); the same name with "_down" is NOT_SERVING.
	DefaultHealthService = "ping"
)

// Config says which listeners to run and how. Zero values mean Fortio's
// defaults. Addresses are "host:port", ":port", a bare port (all
// interfaces, as in Fortio) or a path containing "/" (a Unix socket).
type Config struct {
	HTTPAddr        string        // HTTP/1.1 + h2c echo; "" = off
	TCPAddr         string        // TCP echo; "" = off
	GRPCAddr        string        // gRPC health + ping; "" = off
	MaxDelay        time.Duration // cap for delay= and ping delayNanos; 0 = DefaultMaxDelay, <0 = no delays
	MaxPayloadBytes int           // cap for size=; 0 = DefaultMaxPayloadBytes, <0 = 0
	Logger          *slog.Logger  // nil = discard

	IdleTimeout    time.Duration // HTTP keep-alive idle timeout; 0 = DefaultIdleTimeout
	DebugPath      string        // path of the debug handler; "" = DefaultDebugPath
	DisableDebug   bool          // no debug handler (every path echoes)
	HealthService  string        // gRPC health name reported SERVING; "" = DefaultHealthService
	GRPCMaxStreams uint32        // gRPC MaxConcurrentStreams; 0 = gRPC's default

	// TLSCert and TLSKey (PEM files) make the HTTP listener serve HTTPS, with
	// HTTP/2 offered by ALPN, instead of cleartext HTTP/1.1 + h2c.
	TLSCert, TLSKey string
}

// Server runs the configured echo listeners. Create it with New.
type Server struct {
	cfg     Config
	limits  Limits
	log     *slog.Logger
	payload []byte // shared, read-only bytes that size= responses are cut from
	plans   planCache
	// upgraded holds HTTP connections hijacked for h2c upgrades.
	upgraded connSet

	mu      sync.Mutex
	started bool
	closed  bool
	http    *httpEcho
	tcp     *tcpEcho
	grpc    *grpcEcho
}

// New returns a server for cfg; nothing is bound until Start.
func New(cfg Config) *Server {
	if cfg.MaxDelay == 0 {
		cfg.MaxDelay = DefaultMaxDelay
	}
	cfg.MaxDelay = max(cfg.MaxDelay, 0)
	if cfg.MaxPayloadBytes == 0 {
		cfg.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	cfg.MaxPayloadBytes = max(cfg.MaxPayloadBytes, 0)
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.DebugPath == "" {
		cfg.DebugPath = DefaultDebugPath
	}
	if cfg.HealthService == "" {
		cfg.HealthService = DefaultHealthService
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{
		cfg:     cfg,
		limits:  Limits{MaxDelay: cfg.MaxDelay, MaxPayloadBytes: cfg.MaxPayloadBytes},
		log:     logger,
		payload: newPayload(cfg.MaxPayloadBytes),
	}
}

// newPayload returns n pseudo-random bytes. Random so that compression
// anywhere on the path (gzip=, a proxy) cannot shrink size= responses; from a
// fixed seed so that runs are repeatable.
func newPayload(n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{'m', 'e', 's', 'h', 'p', 'e', 'r', 'f'})
	_, _ = r.Read(b) // ChaCha8.Read never fails
	return b
}

// Start binds every configured listener, then serves them in background
// goroutines. If any address cannot be bound, the ones already bound are
// closed and the error is returned.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.closed {
		return errors.New("echo server: Start called twice or after Close")
	}
	s.started = true
	var lns []net.Listener
	listen := func(what, addr string) (net.Listener, error) {
		ln, err := Listen(addr)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			return nil, fmt.Errorf("%s on %q: %w", what, addr, err)
		}
		lns = append(lns, ln)
		return ln, nil
	}
	var httpLn, tcpLn, grpcLn net.Listener
	var err error
	if s.cfg.HTTPAddr != "" {
		if httpLn, err = listen("HTTP echo", s.cfg.HTTPAddr); err != nil {
			return err
		}
	}
	if s.cfg.TCPAddr != "" {
		if tcpLn, err = listen("TCP echo", s.cfg.TCPAddr); err != nil {
			return err
		}
	}
	if s.cfg.GRPCAddr != "" {
		if grpcLn, err = listen("gRPC", s.cfg.GRPCAddr); err != nil {
			return err
		}
	}
	if httpLn != nil {
		s.http = s.serveHTTP(httpLn)
	}
	if tcpLn != nil {
		s.tcp = serveTCP(tcpLn, s.log)
	}
	if grpcLn != nil {
		s.grpc = s.serveGRPC(grpcLn)
	}
	return nil
}

// Listen binds addr the way Fortio's servers do: a bare port listens on all
// interfaces, and anything containing "/" is a Unix socket path.
func Listen(addr string) (net.Listener, error) {
	network := "tcp"
	switch {
	case strings.Contains(addr, "/"):
		network = "unix"
	case !strings.Contains(addr, ":"):
		addr = ":" + addr
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// HTTPAddr returns the bound HTTP address ("" if off or not started).
func (s *Server) HTTPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http == nil {
		return ""
	}
	return s.http.ln.Addr().String()
}

// TCPAddr returns the bound TCP echo address ("" if off or not started).
func (s *Server) TCPAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tcp == nil {
		return ""
	}
	return s.tcp.ln.Addr().String()
}

// GRPCAddr returns the bound gRPC address ("" if off or not started).
func (s *Server) GRPCAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grpc == nil {
		return ""
	}
	return s.grpc.ln.Addr().String()
}

// Close stops every listener and closes open connections at once; requests
// in flight (including delayed ones) are cut off. It is safe to call twice.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var errs []error
	if s.http != nil {
		errs = append(errs, s.http.close())
		s.upgraded.closeAll()
	}
	if s.tcp != nil {
		errs = append(errs, s.tcp.close())
	}
	if s.grpc != nil {
		s.grpc.close()
	}
	return errors.Join(errs...)
}
