package testutil

import (
	"net/http"
	"testing"
)

// DiscardWriter is a ResponseWriter that keeps nothing but the status and
// how many bytes were written: what a benchmark of a handler alone (or a
// test of what it allocates) writes to, so that it measures the handler's
// own work, not a recorder's.
type DiscardWriter struct {
	Head    http.Header
	Status  int
	Written int64
}

// NewDiscardWriter returns a DiscardWriter with an empty header.
func NewDiscardWriter() *DiscardWriter { return &DiscardWriter{Head: make(http.Header)} }

func (w *DiscardWriter) Header() http.Header  { return w.Head }
func (w *DiscardWriter) WriteHeader(code int) { w.Status = code }

// Write counts p; a first Write without WriteHeader is a 200, as net/http's.
func (w *DiscardWriter) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	w.Written += int64(len(p))
	return len(p), nil
}

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
