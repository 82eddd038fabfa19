package echo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// smallBody is the largest request body echoed by reading it whole and
// writing it back in one go. One write lets net/http send headers and body
// together (one DATA frame with END_STREAM on h2). Larger or unknown-length
// bodies are streamed, so memory stays bounded and clients that send and
// receive at the same time work.
const smallBody = 64 * 1024

var (
	smallBufs  = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}
	streamBufs = sync.Pool{New: func() any { b := make([]byte, 32*1024); return &b }}
	noPlan     = &EchoPlan{}
)

type httpEcho struct {
	ln  net.Listener
	srv *http.Server
}

// serveHTTP serves HTTP/1.1 and cleartext HTTP/2 on ln. net/http handles h2c
// with prior knowledge itself; the Upgrade: h2c dance is done in the handler.
func (s *Server) serveHTTP(ln net.Listener) *httpEcho {
	var protos http.Protocols
	protos.SetHTTP1(true)
	tls := s.cfg.TLSCert != ""
	if tls {
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	hs := &http.Server{
		Handler:           s.Handler(),
		Protocols:         &protos,
		ReadHeaderTimeout: s.cfg.IdleTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	go func() {
		var err error
		if tls {
			err = hs.ServeTLS(ln, s.cfg.TLSCert, s.cfg.TLSKey)
		} else {
			err = hs.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("HTTP echo server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return &httpEcho{ln: ln, srv: hs}
}

func (h *httpEcho) close() error {
	if err := h.srv.Close(); err != nil {
		return fmt.Errorf("close HTTP echo: %w", err)
	}
	return nil
}

// Handler returns the echo HTTP handler: the debug path answers with a text
// dump of the request, every other path echoes. It is what the HTTP listener
// serves, exposed for benchmarks and for embedding in other servers.
func (s *Server) Handler() http.Handler {
	up := &h2cUpgrader{handler: http.HandlerFunc(s.route), conns: &s.upgraded}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only requests carrying an Upgrade header pay for the h2c check.
		if r.Header["Upgrade"] != nil && up.tryUpgrade(w, r) {
			return
		}
		s.route(w, r)
	})
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.DisableDebug && r.URL.Path == s.cfg.DebugPath {
		s.debug(w, r)
		return
	}
	s.echo(w, r)
}

// plan returns the request's parsed query, answering 400 itself on error.
func (s *Server) plan(w http.ResponseWriter, r *http.Request) (*EchoPlan, bool) {
	if r.URL.RawQuery == "" {
		return noPlan, true
	}
	p, err := s.plans.plan(r.URL.RawQuery, s.limits)
	if err != nil {
		http.Error(w, "meshperf echo: "+err.Error(), http.StatusBadRequest)
		return nil, false
	}
	return p, true
}

// echo is the hot path: keep it free of logging, fmt and avoidable allocations.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	p, ok := s.plan(w, r)
	if !ok {
		return
	}
	out := p.Draw(rand.Float32, p.Gzip.Set && acceptsGzip(r))
	if !applyCommon(w, r, p, out) {
		return
	}
	if out.Gzip {
		gw := newGzipWriter(w)
		defer gw.finish()
		w = gw
	}
	if out.Size >= 0 {
		// Drain the body so the connection can be reused for the next request.
		_, _ = io.Copy(io.Discard, r.Body)
		h := w.Header()
		if h["Content-Type"] == nil {
			h["Content-Type"] = octetStream
		}
		h["Content-Length"] = p.contentLength(out.Size) // shared, never modified
		w.WriteHeader(out.Status)
		_, _ = w.Write(s.payload[:out.Size])
		return
	}
	echoBody(w, r, out.Status)
}

var octetStream = []string{"application/octet-stream"}

// applyCommon does what both the echo and debug handlers honour: delay=,
// close= and header=. It returns false if the request was cancelled while
// sleeping.
func applyCommon(w http.ResponseWriter, r *http.Request, p *EchoPlan, out Outcome) bool {
	if out.Delay > 0 && !sleep(r.Context(), out.Delay) {
		return false
	}
	h := w.Header()
	if out.Close {
		// net/http closes an HTTP/1.x connection after a response carrying
		// this header; HTTP/2 has no per-response close and drops it.
		h["Connection"] = closeValue
	}
	for _, kv := range p.Headers {
		h[kv.Name] = append(h[kv.Name], kv.Value)
	}
	return true
}

var closeValue = []string{"close"}

// sleep waits d, returning early (false) if ctx ends first, so that Close
// does not wait for delayed responses.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header["Accept-Encoding"] {
		if strings.Contains(v, "gzip") {
			return true
		}
	}
	return false
}

// echoBody writes the request body back with the given status, echoing the
// request's Content-Type and Content-Length unless already set.
func echoBody(w http.ResponseWriter, r *http.Request, status int) {
	h := w.Header()
	for _, k := range [...]string{"Content-Type", "Content-Length"} {
		if v := r.Header[k]; v != nil && h[k] == nil {
			h[k] = v // shared, never modified by either side
		}
	}
	if r.ContentLength < 0 || r.ContentLength > smallBody {
		streamBody(w, r, status)
		return
	}
	if r.ContentLength == 0 {
		w.WriteHeader(status)
		return
	}
	bp := smallBufs.Get().(*[]byte)
	defer smallBufs.Put(bp)
	if int64(cap(*bp)) < r.ContentLength {
		*bp = make([]byte, r.ContentLength)
	}
	buf := (*bp)[:r.ContentLength]
	if _, err := io.ReadFull(r.Body, buf); err != nil {
		h.Del("Content-Length")
		h.Del("Content-Type")
		http.Error(w, "meshperf echo: reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf)
}

// streamBody copies the body back as it arrives. On HTTP/2 each chunk is
// flushed so that a client streaming a request sees its echo promptly; on
// HTTP/1.x full duplex must be enabled to read after the response started.
func streamBody(w http.ResponseWriter, r *http.Request, status int) {
	rc := http.NewResponseController(w)
	h2 := r.ProtoMajor == 2
	if !h2 {
		_ = rc.EnableFullDuplex() // fails only for writers that cannot; then we copy half duplex
	}
	w.WriteHeader(status)
	bp := streamBufs.Get().(*[]byte)
	defer streamBufs.Put(bp)
	buf := *bp
	for {
		n, err := r.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if h2 {
				_ = rc.Flush()
			}
		}
		if err != nil {
			// EOF is the normal end; any other error means the client went
			// away mid-body and there is nobody left to tell.
			return
		}
	}
}
