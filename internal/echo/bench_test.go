package echo

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// The benchmarks call the handler directly, so they measure the echo
// server's own per-request work, not the network or net/http's parsing.

func benchHandler(b *testing.B, target string) {
	h := New(Config{}).Handler()
	req := httptest.NewRequest(http.MethodGet, target, http.NoBody)
	w := &discardWriter{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		h.ServeHTTP(w, req)
	}
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
}

func BenchmarkEchoPlain(b *testing.B)    { benchHandler(b, "/echo") }
func BenchmarkEchoSize1024(b *testing.B) { benchHandler(b, "/echo?size=1024") }

func BenchmarkEchoWeighted(b *testing.B) {
	benchHandler(b, "/echo?status=200:50,200:50&size=512:50,1024:50&delay=0s:10")
}

// discardWriter is a minimal ResponseWriter that keeps nothing but the status.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
