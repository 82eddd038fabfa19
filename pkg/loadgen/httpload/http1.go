package httpload

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// readBufferSize is the per-connection read buffer; response headers must fit in
// it (Fortio's -httpbufferkb defaults to 128 kB for the same reason).
const readBufferSize = 64 << 10

// http1Conn makes HTTP/1.x requests on one socket, reopened when the server or
// the options close it. Requests are written from pre-built bytes and responses
// parsed by fasthttp's parser into a reused Response: no allocation per request,
// which is most of what makes a client cheap (net/http's client allocates
// several objects per request and runs a goroutine per connection).
type http1Conn struct {
	t         target
	request   []byte
	skipBody  bool // HEAD
	keepAlive bool
	timeout   time.Duration
	dialer    *loadgen.Dialer

	conn     net.Conn
	reader   countingReader
	br       *bufio.Reader
	reused   bool // the socket has carried a request already
	response fasthttp.Response

	sizes, headerSizes *histogram.Histogram
}

func newHTTP1Conn(o Options, t target, hs []header, dialer *loadgen.Dialer) *http1Conn {
	c := &http1Conn{
		t:           t,
		request:     wireRequest(o, t, hs),
		skipBody:    o.method() == "HEAD",
		keepAlive:   !o.DisableKeepAlive,
		timeout:     o.Timeout,
		dialer:      dialer,
		sizes:       histogram.New(histogram.Bytes),
		headerSizes: histogram.New(histogram.Bytes),
	}
	c.br = bufio.NewReaderSize(&c.reader, readBufferSize)
	return c
}

func (c *http1Conn) Call(ctx context.Context) loadgen.Outcome {
	code, err := c.roundTrip(ctx)
	if err != nil && c.reused && isStaleConnection(err) {
		// The server closed an idle keep-alive socket before seeing our request:
		// that is not a failed request, so try once on a fresh socket, as
		// browsers and Fortio do.
		c.close()
		code, err = c.roundTrip(ctx)
	}
	if err != nil {
		c.close()
		return loadgen.Outcome{Code: loadgen.SocketError, Err: err}
	}
	return loadgen.Outcome{Code: code, OK: code >= 200 && code <= 299}
}

func (c *http1Conn) roundTrip(ctx context.Context) (int, error) {
	if c.conn == nil {
		conn, err := c.dialer.Dial(ctx, c.t.addr)
		if err != nil {
			return 0, err
		}
		c.conn, c.reader.r, c.reused = conn, conn, false
		c.br.Reset(&c.reader)
	}
	if c.timeout > 0 {
		if err := c.conn.SetDeadline(time.Now().Add(c.timeout)); err != nil {
			return 0, err
		}
	}
	c.reader.n = 0
	if _, err := c.conn.Write(c.request); err != nil {
		return 0, err
	}
	c.response.SkipBody = c.skipBody
	if err := c.response.Read(c.br); err != nil {
		return 0, err
	}
	c.reused = true
	size := c.reader.n - int64(c.br.Buffered())
	c.sizes.Record(size)
	c.headerSizes.Record(size - int64(len(c.response.Body())))
	if !c.keepAlive || c.response.ConnectionClose() {
		c.close()
	}
	return c.response.StatusCode(), nil
}

func (c *http1Conn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// isStaleConnection says whether err is how a reused socket that the server had
// already closed fails: EOF or a reset before any response byte.
func isStaleConnection(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// countingReader counts the bytes read from the socket, which gives each
// response's size on the wire (headers included) without parsing twice.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
