package testutil

import (
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ServeGRPC serves what register adds on a plaintext loopback port until
// the test ends, and returns a client connection to it.
func ServeGRPC(t testing.TB, register func(grpc.ServiceRegistrar)) *grpc.ClientConn {
	t.Helper()
	return DialGRPC(t, ServeGRPCWith(t, nil, register), insecure.NewCredentials())
}

// DialGRPC returns a client connection to addr with creds, closed when the
// test ends.
func DialGRPC(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// ServeGRPCWith serves what register adds on a loopback port, with a
// server built with opts, until the test ends, and returns its address.
func ServeGRPCWith(t testing.TB, opts []grpc.ServerOption, register func(grpc.ServiceRegistrar)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(opts...)
	register(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}
