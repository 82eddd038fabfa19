package echo

import (
	"bytes"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"
)

// debugBodyMax is how much of the request body the debug page shows: the
// whole body if it is at most this long (plus 3), else its length and the
// first and last halves of this many bytes.
const debugBodyMax = 512

var startTime = time.Now()

// debug answers with a plain-text description of the request (method, URL,
// protocol, headers, body), like Fortio's debug handler, for checking what
// actually reached the server through a mesh. It honours delay=, close= and
// header=, and gzips whenever the client accepts gzip.
func (s *Server) debug(w http.ResponseWriter, r *http.Request) {
	p, ok := s.plan(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "meshperf echo: reading request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var b bytes.Buffer
	host, _ := os.Hostname()
	b.WriteString("meshperf echo debug server up for ")
	b.WriteString(time.Since(startTime).Round(100 * time.Millisecond).String())
	b.WriteString(" on ")
	b.WriteString(host)
	b.WriteString(" - request from ")
	b.WriteString(r.RemoteAddr)
	b.WriteString("\n\n")
	b.WriteString(r.Method + " " + r.URL.String() + " " + r.Proto)
	b.WriteString("\n\nheaders:\n\n")
	// net/http moves Host out of the header map; show it first, as sent.
	b.WriteString("Host: " + r.Host)
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		b.WriteString("\n" + name + ": ")
		for i, v := range r.Header[name] {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(v)
		}
	}
	b.WriteString("\n\nbody:\n\n")
	b.WriteString(DebugSummary(body, debugBodyMax))
	b.WriteByte('\n')

	out := p.Draw(rand.Float32, false)
	if !applyCommon(w, r, p, out) {
		return
	}
	if acceptsGzip(r) {
		gw := newGzipWriter(w)
		defer gw.finish()
		w = gw
	}
	if w.Header()["Content-Type"] == nil {
		w.Header().Set("Content-Type", "text/plain; charset=UTF-8")
	}
	_, _ = w.Write(b.Bytes())
}

// DebugSummary returns buf escaped as a Go string literal body, or, when buf
// is longer than limit+3 bytes, its length followed by the escaped first and
// last limit/2 bytes joined by "..." (shortening by less than 3 saves nothing).
func DebugSummary(buf []byte, limit int) string {
	if len(buf) <= limit+3 {
		return escape(buf)
	}
	half := limit / 2
	return strconv.Itoa(len(buf)) + ": " + escape(buf[:half]) + "..." + escape(buf[len(buf)-half:])
}

func escape(b []byte) string {
	q := strconv.Quote(string(b))
	return q[1 : len(q)-1]
}
