package echo

import (
	"compress/gzip"
	"io"
	"net/http"
	"sync"
)

// gzip writers are pooled: each one holds ~256 KiB of compressor state, far
// too much to allocate per request.
var gzipPool = sync.Pool{New: func() any { return gzip.NewWriter(io.Discard) }}

// gzipWriter compresses the response body for gzip= requests.
type gzipWriter struct {
	http.ResponseWriter
	gz *gzip.Writer
}

func newGzipWriter(w http.ResponseWriter) *gzipWriter {
	w.Header()["Content-Encoding"] = gzipValue
	gz := gzipPool.Get().(*gzip.Writer)
	gz.Reset(w)
	return &gzipWriter{ResponseWriter: w, gz: gz}
}

var gzipValue = []string{"gzip"}

// WriteHeader drops any Content-Length: it counted uncompressed bytes.
func (g *gzipWriter) WriteHeader(code int) {
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}

func (g *gzipWriter) Write(b []byte) (int, error) {
	return g.gz.Write(b) //nolint:wrapcheck // an io.Writer passes errors through
}

// Flush pushes what has been compressed so far to the client.
func (g *gzipWriter) Flush() {
	_ = g.gz.Flush()
	_ = http.NewResponseController(g.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the real writer.
func (g *gzipWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// finish writes the gzip trailer and returns the compressor to the pool.
func (g *gzipWriter) finish() {
	_ = g.gz.Close()
	g.gz.Reset(io.Discard) // drop the reference to the response writer
	gzipPool.Put(g.gz)
	g.gz = nil
}
