package cli

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/meshperf/meshperf/internal/testutil"
)

// syncBuffer is a buffer safe to read while runServer writes to it.
type syncBuffer = testutil.SyncBuffer

// Port 0 everywhere: the ready file says where each listener ended up, and
// each answers there; the ignored Fortio flags draw a notice each.
func TestServerReadyFileNamesListenersThatAnswer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readyFile := filepath.Join(t.TempDir(), "server.ready")
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServer(ctx, []string{"-http-port", "127.0.0.1:0", "-tcp-port", "127.0.0.1:0", "-grpc-port", "127.0.0.1:0",
			"-ready-file", readyFile, "-redirect-port", "9999", "-ui-path", "/x/"}, &stdout, &stderr)
	}()
	r := waitReadyFile(t, readyFile)
	if r.PID != os.Getpid() || len(r.Listeners) != 3 {
		t.Errorf("ready file %+v: want this process's pid and 3 listeners", r)
	}
	for _, f := range []string{"-redirect-port", "-ui-path"} {
		if !strings.Contains(stderr.String(), "ignoring Fortio flag "+f) {
			t.Errorf("no notice for ignored %s; stderr %q", f, stderr.String())
		}
	}
	resp, err := http.Post("http://"+r.Listeners["http"]+"/?status=202", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || string(body) != "hi" {
		t.Errorf("HTTP echo: %d %q", resp.StatusCode, body)
	}
	if got := tcpEcho(t, r.Listeners["tcp"], "ping\n"); got != "ping\n" {
		t.Errorf("TCP echo answered %q", got)
	}
	cc, err := grpc.NewClient(r.Listeners["grpc"], grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hctx, hcancel := context.WithTimeout(ctx, 10*time.Second)
	defer hcancel()
	if h, err := healthpb.NewHealthClient(cc).Check(hctx, &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("gRPC health: %v, %v", h, err)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after stop, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if c, err := net.Dial("tcp", r.Listeners["tcp"]); err == nil {
		c.Close()
		t.Error("TCP echo still listening after stop")
	}
	if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
		t.Errorf("the ready file outlived the server: %v", err)
	}
}

func tcpEcho(t *testing.T, addr, msg string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(msg))
	n, _ := io.ReadFull(c, buf)
	return string(buf[:n])
}

// A disabled listener is neither started nor in the ready file.
func TestServerDisabledListenerIsNotReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	readyFile := filepath.Join(t.TempDir(), "server.ready")
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServer(ctx, []string{"-http-port", "127.0.0.1:0", "-tcp-port", "disabled", "-grpc-port", "disabled",
			"-ready-file", readyFile}, &stdout, &stderr)
	}()
	r := waitReadyFile(t, readyFile)
	cancel()
	<-done
	if len(r.Listeners) != 1 || r.Listeners["http"] == "" || strings.Contains(stdout.String(), "gRPC") {
		t.Errorf("ready file %+v, stdout %q: want the HTTP listener only", r, stdout.String())
	}
}

func TestServerBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-no-such-flag"}, {"-maxpayloadsizekb", "-1"}, {"-max-echo-delay", "soon"},
		{"-loglevel", "loud"}, {"extra-arg"},
	} {
		var stdout, stderr syncBuffer
		code := runServer(context.Background(), args, &stdout, &stderr)
		if code != 2 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line", args, code, stderr.String())
		}
	}
}

func TestServerPortInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	var stdout, stderr syncBuffer
	code := runServer(context.Background(), []string{"-http-port", busy.Addr().String(),
		"-tcp-port", "disabled", "-grpc-port", "disabled"}, &stdout, &stderr)
	if code != 1 || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), busy.Addr().String()) {
		t.Errorf("exit %d, stderr %q; want 1 and one line naming the address", code, stderr.String())
	}
}
