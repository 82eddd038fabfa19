package echo

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"net"
	"net/http"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
)

// maxUpgradeBody bounds the body of an "Upgrade: h2c" request, which has to
// be read whole before the connection switches protocol.
const maxUpgradeBody = 1 << 20

// h2cUpgrader implements the HTTP/1.1 "Upgrade: h2c" handshake (RFC 7540
// section 3.2). net/http serves h2c with prior knowledge but not the
// upgrade, and some clients (curl --http2 on http:// URLs) still use it.
// x/net/http2's server is deprecated in favour of net/http, but it is the
// only Go implementation that can answer the upgraded request as stream 1.
type h2cUpgrader struct {
	handler http.Handler
	//lint:ignore SA1019 net/http has no equivalent for the h2c upgrade (see above).
	h2    http2.Server
	conns *connSet // hijacked connections are not closed by http.Server.Close
}

// tryUpgrade takes over the connection and serves it as HTTP/2 if r asks for
// an h2c upgrade; it returns false, having done nothing, otherwise.
func (u *h2cUpgrader) tryUpgrade(w http.ResponseWriter, r *http.Request) bool {
	if r.ProtoMajor != 1 ||
		!httpguts.HeaderValuesContainsToken(r.Header["Upgrade"], "h2c") ||
		!httpguts.HeaderValuesContainsToken(r.Header["Connection"], "HTTP2-Settings") {
		return false
	}
	vals := r.Header["Http2-Settings"]
	if len(vals) != 1 {
		return false // not a valid upgrade: answer over HTTP/1.1
	}
	settings, err := base64.RawURLEncoding.DecodeString(vals[0])
	if err != nil {
		return false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxUpgradeBody+1))
	if err != nil || len(body) > maxUpgradeBody {
		http.Error(w, "meshperf echo: h2c upgrade request body unreadable or over 1 MiB", http.StatusRequestEntityTooLarge)
		return true
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false // cannot hijack: keep speaking HTTP/1.1
	}
	if !u.conns.add(conn) {
		return true
	}
	defer func() {
		u.conns.remove(conn)
		_ = conn.Close()
	}()
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"); err != nil {
		return true
	}
	if err := rw.Flush(); err != nil {
		return true
	}
	//lint:ignore SA1019 net/http has no equivalent for the h2c upgrade.
	u.h2.ServeConn(&bufferedConn{Conn: conn, r: rw.Reader}, &http2.ServeConnOpts{
		Context:        r.Context(),
		Handler:        u.handler,
		UpgradeRequest: r,
		Settings:       settings,
	})
	return true
}

// bufferedConn reads first what the HTTP/1.1 server had already buffered
// (the start of the client's HTTP/2 preface, typically).
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) {
	if c.r != nil {
		if c.r.Buffered() > 0 {
			return c.r.Read(p) //nolint:wrapcheck // net.Conn passes errors through
		}
		c.r = nil
	}
	return c.Conn.Read(p) //nolint:wrapcheck // net.Conn passes errors through
}
