package netutil

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meshperf/meshperf/internal/kube/pki"
	"github.com/meshperf/meshperf/internal/testutil"
)

// serveReporting serves gRPC's health service on loopback with creds
// wrapped by ReportFailedConnections, logging into the returned buffer with
// an hour's interval, so that a test sees exactly the first line of each
// kind.
func serveReporting(t *testing.T, creds credentials.TransportCredentials) (string, *testutil.SyncBuffer) {
	t.Helper()
	logged := &testutil.SyncBuffer{}
	limiter := NewLogLimiter(slog.New(slog.NewTextHandler(logged, nil)), time.Hour)
	addr := testutil.ServeGRPCWith(t, []grpc.ServerOption{grpc.Creds(ReportFailedConnections(creds, limiter))},
		func(g grpc.ServiceRegistrar) { healthpb.RegisterHealthServer(g, health.NewServer()) })
	return addr, logged
}

func checkHealth(t *testing.T, addr string, creds credentials.TransportCredentials) {
	t.Helper()
	cc := testutil.DialGRPC(t, addr, creds)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("an honest gRPC call failed through the wrapped credentials: %v", err)
	}
}

func lineCount(s string) int { return strings.Count(s, "\n") }

// An HTTP/1 request, or a TLS client, on the plaintext gRPC port is logged
// with its peer and first bytes, once per interval however many come; a
// gRPC client and a connection that closes without a byte are not.
func TestGarbageOnThePlaintextPortIsLogged(t *testing.T) {
	addr, logged := serveReporting(t, insecure.NewCredentials())

	checkHealth(t, addr, insecure.NewCredentials())
	testutil.WriteAndWaitForClose(t, addr, nil)
	if got := logged.String(); got != "" {
		t.Fatalf("an honest call and a bare connect were logged: %s", got)
	}

	testutil.WriteAndWaitForClose(t, addr, []byte("GET /debug HTTP/1.1\r\nHost: pilot\r\n\r\n"))
	line := logged.String()
	for _, want := range []string{"not HTTP/2", "peer=127.0.0.1:", "address=" + addr, `GET /debug HTTP/1.1\r\nHos`, "suppressed=0"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	// A partial preface, then garbage: still not HTTP/2.
	testutil.WriteAndWaitForClose(t, addr, []byte("PRI * HTTP/1.1\r\n\r\n"))
	testutil.WriteAndWaitForClose(t, addr, []byte("\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"))
	if got := lineCount(logged.String()); got != 1 {
		t.Errorf("%d lines for three garbage connections within the interval, want 1:\n%s", got, logged)
	}
	checkHealth(t, addr, insecure.NewCredentials())
}

// A failed TLS handshake on the TLS port is logged; a TLS client that
// trusts the server is served and not logged.
func TestFailedTLSHandshakeIsLogged(t *testing.T) {
	ca, err := pki.NewAuthority("test root", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(pki.CertSpec{CommonName: "pilot", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	addr, logged := serveReporting(t, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}}))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM)

	checkHealth(t, addr, credentials.NewTLS(&tls.Config{RootCAs: roots}))
	// A bare connect first: logged, it would take the one line of the
	// interval that the failed handshake below must have.
	testutil.WriteAndWaitForClose(t, addr, nil)
	testutil.WriteAndWaitForClose(t, addr, []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")) // plaintext gRPC on the TLS port
	// gRPC's TLS credentials close the connection before the handshake's
	// error reaches the wrapper.
	testutil.Eventually(t, 10*time.Second, func() error {
		if logged.String() == "" {
			return errors.New("nothing logged for a failed TLS handshake")
		}
		return nil
	})
	line := logged.String()
	for _, want := range []string{"TLS handshake failed", "peer=127.0.0.1:", "address=" + addr, "does not look like a TLS handshake"} {
		if !strings.Contains(line, want) {
			t.Errorf("log %q lacks %q", line, want)
		}
	}
	testutil.WriteAndWaitForClose(t, addr, []byte("GET / HTTP/1.1\r\n\r\n"))
	if got := lineCount(logged.String()); got != 1 {
		t.Errorf("%d lines for two failed handshakes within the interval, want 1:\n%s", got, logged)
	}
}

// gRPC is handed the very connection it accepted: it sets TCP_USER_TIMEOUT
// and pools an idle connection's 32 KiB read buffer only for a
// *net.TCPConn, and a wrapped one cost every proxy's connection 32 KiB.
func TestPlaintextHandshakeHandsOverTheTCPConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	raw, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := client.Write(http2Preface); err != nil {
		t.Fatal(err)
	}
	creds := ReportFailedConnections(insecure.NewCredentials(), NewLogLimiter(nil, time.Hour))
	conn, _, err := creds.ServerHandshake(raw)
	if err != nil {
		t.Fatal(err)
	}
	if conn != raw {
		t.Fatalf("the handshake returned a %T, want the accepted *net.TCPConn itself", conn)
	}
	got := make([]byte, len(http2Preface))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != string(http2Preface) {
		t.Errorf("after the handshake the connection reads %q, %v: the preface must be left for gRPC", got, err)
	}
}
