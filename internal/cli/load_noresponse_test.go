package cli

import (
	"bufio"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

// A load in which no call got a response (every one a socket error) exits 1
// with one line saying why, whether or not -n skipped the warm-up, on every
// protocol; the JSON result is still written, with the socket errors under
// code -1; -allow-initial-errors accepts such a run (exit 0).
func TestLoadWithoutAnyResponseExitsOne(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		target    string
		errorCode string // how the JSON counts a call without a response
	}{
		{"http with -n", []string{"-qps", "0", "-n", "5"}, "http://" + testutil.ClosedPort(t) + "/", "-1"},
		{"http/2 with -n", []string{"-qps", "0", "-n", "5", "-h2"}, "http://" + testutil.ClosedPort(t) + "/", "-1"},
		{"tcp with -n", []string{"-qps", "0", "-n", "5"}, "tcp://" + testutil.ClosedPort(t), "-1"},
		{"grpc with -n", []string{"-qps", "0", "-n", "5", "-grpc"}, testutil.ClosedPort(t), "ERROR"},
		// The warm-up is answered, and every timed call refused after it.
		{"http gone after the warm-up", []string{"-c", "1", "-qps", "50", "-t", "200ms"}, "http://" + answerOnceThenClose(t) + "/", "-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resultFile := filepath.Join(t.TempDir(), "result.json")
			args := append(append([]string{"-quiet", "-json", resultFile}, tc.args...), tc.target)
			code, _, stderr := runLoadT(t, args...)
			if code != exitFailed || strings.Count(stderr, "\n") != 1 ||
				!strings.HasPrefix(stderr, "meshperf load: "+tc.target+": no call got a response: all ") ||
				!strings.Contains(stderr, "ended in socket errors") || !strings.Contains(stderr, "-allow-initial-errors") {
				t.Errorf("exit %d, stderr %q; want %d and one line saying no call got a response", code, stderr, exitFailed)
			}
			result := decodeJSON[struct{ RetCodes map[string]int64 }](t, readFile(t, resultFile))
			if len(result.RetCodes) != 1 || result.RetCodes[tc.errorCode] < 1 {
				t.Errorf("RetCodes %v, want only calls without a response (%s)", result.RetCodes, tc.errorCode)
			}
			if !strings.Contains(tc.name, "after the warm-up") {
				if code, _, stderr := runLoadT(t, append([]string{"-quiet", "-allow-initial-errors"}, append(tc.args, tc.target)...)...); code != exitOK {
					t.Errorf("with -allow-initial-errors: exit %d, stderr %q; want %d", code, stderr, exitOK)
				}
			}
		})
	}
}

// answerOnceThenClose is an HTTP target that answers one request, then
// closes its connection and stops listening: a target that dies after the
// warm-up.
func answerOnceThenClose(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		ln.Close()
		if err != nil {
			return
		}
		defer conn.Close()
		if req, err := http.ReadRequest(bufio.NewReader(conn)); err == nil {
			req.Body.Close()
			_, _ = conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		}
	}()
	return ln.Addr().String()
}
