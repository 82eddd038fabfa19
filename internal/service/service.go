// Package service plays one service of an isotope service graph, as
// isotope's own service does, so that isotope's topologies run unchanged
// under meshperf: plain HTTP/1.1, /metrics in Prometheus' text format with
// isotope's metric names, and on any other path the service's script (sleep,
// call other services, copy the trace headers along), failing
// deterministically at the service's error rate and answering with its
// response size.
//
// The lab runs one such process per replica, hundreds on one machine, so
// the service is built to cost little per process and per request: the
// response body, the outbound requests' bodies and URLs and every metric's
// labelled series are made once at start.
package service

import (
	"context"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"github.com/meshperf/meshperf/internal/hosts"
	"github.com/meshperf/meshperf/internal/topology"
)

// Config is what a Handler plays and how it reaches its peers.
type Config struct {
	// Service is the service played; its calls name services of the same
	// topology.
	Service topology.Service
	// Hosts resolves the names the calls dial before the system resolver
	// does: the lab's hosts file, naming each Service's address. nil
	// leaves names to the system.
	Hosts *hosts.Table
	// Dial, when set, opens outbound connections instead (Hosts unused):
	// tests map each name to a port of their own.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Registry receives the service's metrics; nil makes a private one.
	Registry *prometheus.Registry
	// Chance returns an integer in [0, n): it decides the calls made with a
	// probability. nil is math/rand/v2's IntN; a test passes a seeded one.
	Chance func(n int) int
	// Logger logs failed requests at debug level (nil: none); a failure is
	// already the answer's status and body, and counted.
	Logger *slog.Logger
}

// Handler serves one service: /metrics, and the script on any other path.
type Handler struct {
	service    topology.Service
	script     []step
	errorEvery uint64 // 0: never fail on purpose
	requests   atomic.Uint64
	response   []byte // the body of every 200, made once
	calls      bool   // the script calls another service
	client     *fasthttp.Client
	chance     func(n int) int
	metrics    *metrics
	// metricsH serves /metrics: scraped every few seconds, it can afford
	// net/http's handler behind an adaptor.
	metricsH fasthttp.RequestHandler
	log      *slog.Logger
}

// New prepares the service's handler: its response body, its outbound
// requests and its metrics. It fails on a script it cannot play.
func New(cfg Config) (*Handler, error) {
	if cfg.Service.Name == "" {
		return nil, errors.New("service: no service given")
	}
	if cfg.Service.ResponseSize < 0 {
		return nil, fmt.Errorf("service %s: negative response size %d", cfg.Service.Name, cfg.Service.ResponseSize)
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", cfg.Service.Name, err)
	}
	h := &Handler{
		service:    cfg.Service,
		errorEvery: uint64(cfg.Service.ErrorEvery()),
		response:   randomBytes(cfg.Service.ResponseSize),
		client:     newClient(cfg.Dial, cfg.Hosts),
		chance:     cfg.Chance,
		metrics:    m,
		metricsH:   fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})),
		log:        cfg.Logger,
	}
	if h.chance == nil {
		h.chance = rand.IntN
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.script, err = compileScript(cfg.Service.Script, m)
	if err != nil {
		return nil, fmt.Errorf("service %s: %w", cfg.Service.Name, err)
	}
	h.calls = hasCall(h.script)
	return h, nil
}

// Close drops the idle outbound connections.
func (h *Handler) Close() { h.client.CloseIdleConnections() }

// Serve answers on ln until ctx ends, then closes the server and the
// outbound connections.
func (h *Handler) Serve(ctx context.Context, ln net.Listener) error {
	srv := h.server()
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			// Requests under way get a moment to finish; a script that
			// sleeps longer is cut short, as a killed process's would be.
			sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
			defer cancel()
			_ = srv.ShutdownWithContext(sctx)
		case <-stopped:
		}
	}()
	err := srv.Serve(ln)
	close(stopped)
	h.Close()
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// shutdownGrace is how long a stopping service waits for requests under
// way.
const shutdownGrace = time.Second

// maxRequestBody bounds a request's body, which the server reads whole:
// isotope's calls send at most a few megabytes.
const maxRequestBody = 256 << 20

// server is the HTTP/1.1 server of the service. fasthttp serves each
// connection on one goroutine with pooled buffers and parses headers
// without allocating: about half the CPU of net/http per request.
func (h *Handler) server() *fasthttp.Server {
	return &fasthttp.Server{
		Handler: h.serve,
		// A peer that opens a connection and sends nothing must not hold
		// a goroutine forever; a keep-alive connection idles as long as
		// the callers' pools keep theirs (90 s).
		ReadTimeout:           10 * time.Second,
		IdleTimeout:           120 * time.Second,
		MaxRequestBodySize:    maxRequestBody,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		Logger:                slog.NewLogLogger(h.log.Handler(), slog.LevelDebug),
	}
}

// randomBytes is n random bytes, as isotope's bodies are (incompressible,
// should anything on the path compress).
func randomBytes(n int64) []byte {
	b := make([]byte, n)
	_, _ = cryptorand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}
