package loadgen

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// Dialer opens one connection's sockets and keeps the statistics Fortio reports
// about them: how many were opened, to which addresses, and how long each took to
// establish. One Dialer per connection, used from one goroutine.
type Dialer struct {
	Timeout time.Duration
	TLS     *tls.Config // nil: plain TCP
	SocketStats
}

// SocketStats are what Fortio reports about one connection's sockets.
type SocketStats struct {
	Sockets     int                  // sockets opened
	Addresses   map[string]int       // sockets per remote address
	ConnectTime *histogram.Histogram // time to establish each, in ns
}

func newSocketStats() SocketStats {
	return SocketStats{Addresses: map[string]int{}, ConnectTime: histogram.New(histogram.Latency)}
}

// opened counts a socket that took d to connect to addr.
func (s *SocketStats) opened(addr string, d time.Duration) {
	s.Sockets++
	s.Addresses[addr]++
	s.ConnectTime.Record(int64(d))
}

// NewDialer returns a Dialer with empty statistics.
func NewDialer(timeout time.Duration, tlsConfig *tls.Config) *Dialer {
	return &Dialer{Timeout: timeout, TLS: tlsConfig, SocketStats: newSocketStats()}
}

// Dial connects to addr over TCP, then TLS when configured.
func (d *Dialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	start := time.Now()
	nd := net.Dialer{Timeout: d.Timeout}
	var conn net.Conn
	var err error
	if d.TLS != nil {
		td := tls.Dialer{NetDialer: &nd, Config: d.TLS}
		conn, err = td.DialContext(ctx, "tcp", addr)
	} else {
		conn, err = nd.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		// Requests are small and latency is what is measured: never wait to fill a
		// segment. (Go sets this by default; said here because it matters.)
		_ = tc.SetNoDelay(true)
	}
	d.opened(conn.RemoteAddr().String(), time.Since(start))
	return conn, nil
}

// TLSOptions are Fortio's TLS flags: -k, -cacert, -cert and -key.
type TLSOptions struct {
	Insecure bool   // do not verify the server's certificate
	CACert   string // PEM file of the CAs to trust instead of the system's
	Cert     string // PEM client certificate, for mutual TLS
	Key      string // its PEM private key
}

// MTLS says whether a client certificate is presented.
func (o TLSOptions) MTLS() bool { return o.Cert != "" }

// Config builds the client TLS configuration, offering the given ALPN protocols.
func (o TLSOptions) Config(serverName string, alpn ...string) (*tls.Config, error) {
	c := &tls.Config{ServerName: serverName, NextProtos: alpn, InsecureSkipVerify: o.Insecure}
	if o.CACert != "" {
		pem, err := os.ReadFile(o.CACert)
		if err != nil {
			return nil, fmt.Errorf("reading -cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("-cacert %s holds no PEM certificate", o.CACert)
		}
		c.RootCAs = pool
	}
	if (o.Cert == "") != (o.Key == "") {
		return nil, errors.New("-cert and -key go together")
	}
	if o.Cert != "" {
		pair, err := tls.LoadX509KeyPair(o.Cert, o.Key)
		if err != nil {
			return nil, fmt.Errorf("loading -cert/-key: %w", err)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
