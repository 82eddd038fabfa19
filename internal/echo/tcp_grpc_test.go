package echo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/pkg/pingpb"
)

func TestTCPEcho(t *testing.T) {
	s := startServer(t, Config{TCPAddr: "127.0.0.1:0"})
	conn, err := net.Dial("tcp", s.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	msg := bytes.Repeat([]byte("ping\x00"), 20000)
	go func() {
		_, _ = conn.Write(msg)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(conn)
	if err != nil || !bytes.Equal(got, msg) {
		t.Errorf("echoed %d bytes (err %v), want %d identical bytes", len(got), err, len(msg))
	}
}

func TestCloseStopsEverything(t *testing.T) {
	s := New(Config{HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0"})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", s.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	addrs := []string{s.HTTPAddr(), s.TCPAddr(), s.GRPCAddr()}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("open TCP echo connection survived Close")
	}
	// Binding the addresses again proves the listeners are gone. (Dialing them
	// would not: on loopback a dial to a free port in the ephemeral range can
	// connect to itself.) Our own connection is closed first: until it is, the
	// server's side of it holds the TCP echo port in FIN_WAIT_2, which blocks a
	// bind; once closed it moves to TIME_WAIT, which does not.
	conn.Close()
	// That move happens when our FIN reaches the server's side, not within
	// conn.Close, so the bind may fail for a moment: retry until it succeeds.
	for _, a := range addrs {
		testutil.Eventually(t, 10*time.Second, func() error {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				return fmt.Errorf("%s is still taken after Close: %w", a, err)
			}
			return ln.Close()
		})
	}
}

func TestStartFailsCleanly(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s := New(Config{HTTPAddr: "127.0.0.1:0", TCPAddr: busy.Addr().String()})
	if err := s.Start(); err == nil {
		s.Close()
		t.Fatal("Start succeeded on a port in use")
	}
	if s.HTTPAddr() != "" {
		t.Error("HTTP listener left open after a failed Start")
	}
}

func TestGRPC(t *testing.T) {
	s := startServer(t, Config{GRPCAddr: "127.0.0.1:0", MaxDelay: 50 * time.Millisecond})
	cc, err := grpc.NewClient(s.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	hc := healthpb.NewHealthClient(cc)
	for svc, want := range map[string]healthpb.HealthCheckResponse_ServingStatus{
		"": healthpb.HealthCheckResponse_SERVING, "ping": healthpb.HealthCheckResponse_SERVING,
		"ping_down": healthpb.HealthCheckResponse_NOT_SERVING,
	} {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != want {
			t.Errorf("health %q = %v, %v; want %v", svc, resp.GetStatus(), err, want)
		}
	}

	pc := pingpb.NewPingServerClient(cc)
	before := time.Now()
	resp, err := pc.Ping(ctx, &pingpb.PingMessage{Seq: 42, Ts: 1, Payload: "hi", DelayNanos: int64(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(before)
	if resp.GetSeq() != 42 || resp.GetPayload() != "hi" || resp.GetTs() < before.UnixNano() {
		t.Errorf("ping reply %v", resp)
	}
	if elapsed < 50*time.Millisecond || elapsed > 5*time.Second {
		t.Errorf("ping with a 1h delay capped at 50ms took %v", elapsed)
	}
}
