package testutil

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// Send makes one HTTP request with the headers given ("Host" sets the
// request's Host, as a browser on another name would send it) and returns
// the status and the body; a request that gets no answer fails t.
func Send(t testing.TB, method, url, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// ClosedPort is a loopback address nothing listens on (a port the kernel
// handed out and took back): for a server that cannot take port 0, or a
// peer nobody answers.
func ClosedPort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
