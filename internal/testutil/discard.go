package testutil

import (
	"net/http"
	"testing"
)

// DiscardWriter is a ResponseWriter that keeps nothing but the status:
// what a benchmark of a handler alone writes to, so that it measures the
// handler's own work, not a recorder's.
type DiscardWriter struct {
	Head   http.Header
	Status int
}

// NewDiscardWriter returns a DiscardWriter with an empty header.
func NewDiscardWriter() *DiscardWriter { return &DiscardWriter{Head: make(http.Header)} }

func (w *DiscardWriter) Header() http.Header         { return w.Head }
func (w *DiscardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *DiscardWriter) WriteHeader(code int)        { w.Status = code }

// BenchHandler serves req to h b.N times, allocations reported, and fails
// b unless the last answer was a 200.
func BenchHandler(b *testing.B, h http.Handler, req *http.Request) {
	w := NewDiscardWriter()
	b.ReportAllocs()
	for b.Loop() {
		clear(w.Head)
		h.ServeHTTP(w, req)
	}
	if w.Status != http.StatusOK {
		b.Fatalf("status %d", w.Status)
	}
}
