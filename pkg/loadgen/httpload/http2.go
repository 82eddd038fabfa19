package httpload

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// http2Conn makes HTTP/2 requests on one connection of its own (so -c means
// connections, as for HTTP/1.1), one stream at a time, with net/http's client
// connection.
type http2Conn struct {
	t         target
	transport *http.Transport
	scheme    string
	dialer    *loadgen.Dialer
	template  *http.Request
	payload   []byte
	timeout   timeoutContext

	conn               *http.ClientConn
	sizes, headerSizes *histogram.Histogram
}

// timeoutContext bounds one request's time, as -timeout asks.
type timeoutContext func(context.Context) (context.Context, context.CancelFunc)

func newHTTP2Conn(o Options, t target, hs []header, dialer *loadgen.Dialer) (*http2Conn, error) {
	scheme := "http"
	if t.tls {
		scheme = "https"
	}
	req, err := http.NewRequest(o.method(), scheme+"://"+t.host+t.requestURI, nil)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("User-Agent", o.userAgent())
	for _, h := range hs {
		switch {
		case strings.EqualFold(h.name, "Host"):
			req.Host = h.value
		case strings.EqualFold(h.name, "User-Agent"):
			req.Header.Set("User-Agent", h.value) // replaces ours, as on HTTP/1.x
		default:
			req.Header.Add(h.name, h.value)
		}
	}
	if o.ContentType != "" {
		req.Header.Set("Content-Type", o.ContentType)
	}
	req.ContentLength = int64(len(o.Payload))
	timeout := func(ctx context.Context) (context.Context, context.CancelFunc) { return ctx, func() {} }
	if o.Timeout > 0 {
		timeout = func(ctx context.Context) (context.Context, context.CancelFunc) {
			return context.WithTimeout(ctx, o.Timeout)
		}
	}
	// Only HTTP/2 is offered, so a server without it fails the call instead of
	// quietly measuring HTTP/1.1.
	var protos http.Protocols
	if t.tls {
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	dial := func(ctx context.Context, _, addr string) (net.Conn, error) { return dialer.Dial(ctx, addr) }
	return &http2Conn{
		t:           t,
		transport:   &http.Transport{Protocols: &protos, DialContext: dial, DialTLSContext: dial},
		scheme:      scheme,
		dialer:      dialer,
		template:    req,
		payload:     o.Payload,
		timeout:     timeout,
		sizes:       histogram.New(histogram.Bytes),
		headerSizes: histogram.New(histogram.Bytes),
	}, nil
}

func (c *http2Conn) Call(ctx context.Context) loadgen.Outcome {
	code, err := c.roundTrip(ctx)
	if err != nil {
		c.close()
		return loadgen.Outcome{Code: loadgen.SocketError, Err: err}
	}
	return loadgen.Outcome{Code: code, OK: code >= 200 && code <= 299}
}

func (c *http2Conn) roundTrip(ctx context.Context) (int, error) {
	if c.conn == nil || c.conn.Err() != nil {
		c.close()
		if err := c.connect(ctx); err != nil {
			return 0, err
		}
	}
	ctx, cancel := c.timeout(ctx)
	defer cancel()
	req := c.template.WithContext(ctx)
	if len(c.payload) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(c.payload))
	}
	resp, err := c.conn.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return 0, err
	}
	// HPACK compresses headers on the wire; their size here is the plain size
	// of the names and values, which is what a user compares across protocols.
	hsize := int64(len(":status: 200\r\n"))
	for k, vs := range resp.Header {
		for _, v := range vs {
			hsize += int64(len(k) + len(v) + 4)
		}
	}
	c.sizes.Record(hsize + n)
	c.headerSizes.Record(hsize)
	return resp.StatusCode, nil
}

func (c *http2Conn) connect(ctx context.Context) error {
	cc, err := c.transport.NewClientConn(ctx, c.scheme, c.t.addr)
	if err != nil {
		return err
	}
	c.conn = cc
	return nil
}

func (c *http2Conn) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}
