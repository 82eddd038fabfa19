package netutil

import (
	"bytes"
	"errors"
	"io"
	"net"
	"syscall"

	"google.golang.org/grpc/credentials"
)

// Kinds of failed connections, for LogLimiter: a line per kind at most
// every interval.
const (
	KindNotHTTP2     = "not_http2"
	KindTLSHandshake = "tls_handshake"
)

const (
	notHTTP2Message  = "connection refused: not HTTP/2 (gRPC); its first bytes are not HTTP/2's client preface"
	handshakeMessage = "connection refused: TLS handshake failed"
)

// http2Preface is what every HTTP/2 client, gRPC's included, sends first.
var http2Preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// ReportFailedConnections wraps a gRPC server's transport credentials so
// that connections that fail before they could carry a call are logged on
// log: with insecure credentials (a plaintext port), bytes other than
// HTTP/2's client preface (an HTTP/1 request, a TLS client on the
// plaintext port, a scanner); with any other, a failed handshake. gRPC
// closes such connections as before; it says why only on its own logger,
// which is off by default, so without this a misconfigured proxy or a probe
// of the port goes unnoticed. A connection closed before it sent anything
// (a TCP health check) is not reported.
//
// The wrapper hands gRPC the connection it was given, never one of its
// own: gRPC sets TCP_USER_TIMEOUT on a *net.TCPConn, and pools an idle
// connection's 32 KiB read buffer only for one (a wrapped connection cost
// 32 KiB more per proxy). So the preface is read with MSG_PEEK, leaving
// the bytes for gRPC; on a TLS port ALPN already refuses what is not
// HTTP/2, in the handshake.
func ReportFailedConnections(creds credentials.TransportCredentials, log *LogLimiter) credentials.TransportCredentials {
	return &reportingCredentials{TransportCredentials: creds, log: log}
}

type reportingCredentials struct {
	credentials.TransportCredentials
	log *LogLimiter
}

func (c *reportingCredentials) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if c.Info().SecurityProtocol == "insecure" {
		if first, differs := peekPreface(raw); differs {
			c.log.Warn(KindNotHTTP2, notHTTP2Message,
				"address", raw.LocalAddr().String(), "peer", raw.RemoteAddr().String(), "firstBytes", string(first))
		}
	}
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil && !errors.Is(err, io.EOF) {
		c.log.Warn(KindTLSHandshake, handshakeMessage,
			"address", raw.LocalAddr().String(), "peer", raw.RemoteAddr().String(), "error", err.Error())
	}
	return conn, info, err
}

func (c *reportingCredentials) Clone() credentials.TransportCredentials {
	return &reportingCredentials{TransportCredentials: c.TransportCredentials.Clone(), log: c.log}
}

// peekPreface looks at conn's first bytes without reading them, until they
// are HTTP/2's whole preface or differ from it, and returns them and
// whether they differ. A connection that ends first, or is no socket, is
// not judged. gRPC's handshake deadline bounds the wait.
func peekPreface(conn net.Conn) (first []byte, differs bool) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	buf := make([]byte, len(http2Preface))
	n := 0
	_ = raw.Read(func(fd uintptr) bool {
		var rerr error
		for {
			n, _, rerr = syscall.Recvfrom(int(fd), buf, syscall.MSG_PEEK)
			if rerr != syscall.EINTR {
				break
			}
		}
		switch {
		case rerr == syscall.EAGAIN:
			return false // nothing yet: wait until the socket is readable
		case rerr != nil || n <= 0:
			n = 0
			return true // closed, or failed: gRPC's own read says so
		}
		// Wait for more only while what came is the preface's beginning.
		return n == len(http2Preface) || !bytes.Equal(buf[:n], http2Preface[:n])
	})
	first = buf[:max(n, 0)]
	return first, !bytes.Equal(first, http2Preface[:len(first)])
}
