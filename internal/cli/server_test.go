package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while runServer writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listenLine = regexp.MustCompile(`meshperf server: (HTTP echo|TCP echo|gRPC health \+ ping)\S* .*on (\S+)\n`)

func TestServerServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runServer(ctx, []string{"-http-port", "127.0.0.1:0", "-tcp-port", "127.0.0.1:0",
			"-grpc-port", "disabled", "-redirect-port", "9999", "-ui-path", "/x/"}, &stdout, &stderr)
	}()
	addrs := map[string]string{}
	for deadline := time.Now().Add(10 * time.Second); len(addrs) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("listeners not announced; stdout %q stderr %q", stdout.String(), stderr.String())
		}
		for _, m := range listenLine.FindAllStringSubmatch(stdout.String(), -1) {
			addrs[m[1]] = m[2]
		}
	}
	if strings.Contains(stdout.String(), "gRPC") {
		t.Errorf("gRPC started although disabled: %q", stdout.String())
	}
	for _, f := range []string{"-redirect-port", "-ui-path"} {
		if !strings.Contains(stderr.String(), "ignoring Fortio flag "+f) {
			t.Errorf("no notice for ignored %s; stderr %q", f, stderr.String())
		}
	}
	resp, err := http.Post("http://"+addrs["HTTP echo"]+"/?status=202", "text/plain", strings.NewReader("hi"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 || string(body) != "hi" {
		t.Errorf("echo: %d %q", resp.StatusCode, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after stop, want 0; stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not stop")
	}
	if c, err := net.Dial("tcp", addrs["TCP echo"]); err == nil {
		c.Close()
		t.Error("TCP echo still listening after stop")
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
