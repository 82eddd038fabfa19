package echo

import (
	"bufio"
	"compress/gzip"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// startServer runs a server with the given listeners on loopback port 0.
func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	s := New(cfg)
	if err := s.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func startHTTP(t *testing.T) string {
	t.Helper()
	return "http://" + startServer(t, Config{HTTPAddr: "127.0.0.1:0", MaxDelay: time.Second}).HTTPAddr()
}

func do(t *testing.T, c *http.Client, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, string(b)
}

func h1Client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableCompression: true}}
}

// h2cClient speaks HTTP/2 with prior knowledge over cleartext, as
// x/net/http2.Transport with AllowHTTP did (now deprecated in its favour).
func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: &p, DisableCompression: true}}
}

func TestHTTPEcho(t *testing.T) {
	base := startHTTP(t)
	for name, c := range map[string]*http.Client{"h1": h1Client(), "h2c": h2cClient()} {
		t.Run(name, func(t *testing.T) {
			resp, body := do(t, c, "POST", base+"/echo", "hello mesh", "Content-Type", "text/x-test")
			wantProto := map[string]int{"h1": 1, "h2c": 2}[name]
			if resp.ProtoMajor != wantProto {
				t.Errorf("proto = %s, want major %d", resp.Proto, wantProto)
			}
			if resp.StatusCode != 200 || body != "hello mesh" {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, "hello mesh")
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/x-test" {
				t.Errorf("Content-Type = %q, want the request's", ct)
			}
			// A large body takes the streaming path.
			big := strings.Repeat("0123456789", 20000)
			if _, body := do(t, c, "PUT", base+"/any/path", big); body != big {
				t.Errorf("large echo: got %d bytes, want %d", len(body), len(big))
			}
		})
	}
}

func TestHTTPEchoParams(t *testing.T) {
	base := startHTTP(t)
	c := h1Client()
	resp, body := do(t, c, "POST", base+"/?status=418&size=1000&header=X-Mesh:perf&header=X-Two:2", "ignored")
	if resp.StatusCode != 418 || len(body) != 1000 || resp.ContentLength != 1000 {
		t.Errorf("got %d, %d bytes, Content-Length %d; want 418 and 1000", resp.StatusCode, len(body), resp.ContentLength)
	}
	if resp.Header.Get("X-Mesh") != "perf" || resp.Header.Get("X-Two") != "2" {
		t.Errorf("extra headers missing: %v", resp.Header)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	if _, body := do(t, c, "GET", base+"/?size=5000000", ""); len(body) != 1024*1024/4 {
		t.Errorf("size not capped: %d bytes", len(body))
	}
	start := time.Now()
	do(t, c, "GET", base+"/?delay=150ms", "")
	if d := time.Since(start); d < 150*time.Millisecond {
		t.Errorf("delay=150ms answered after %v", d)
	}
}

func TestHTTPClose(t *testing.T) {
	base := startHTTP(t)
	resp, _ := do(t, h1Client(), "GET", base+"/?close=true", "")
	if !resp.Close {
		t.Errorf("close=true: response does not close the connection (headers %v)", resp.Header)
	}
	resp, _ = do(t, h1Client(), "GET", base+"/", "")
	if resp.Close {
		t.Errorf("plain request closed the connection")
	}
}

func TestHTTPGzip(t *testing.T) {
	base := startHTTP(t)
	c := h1Client()
	resp, body := do(t, c, "POST", base+"/?gzip=true", strings.Repeat("abc", 1000), "Accept-Encoding", "gzip")
	if resp.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("not gzipped: %v", resp.Header)
	}
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || string(plain) != strings.Repeat("abc", 1000) {
		t.Errorf("gunzip: %v, %d bytes", err, len(plain))
	}
	resp, body = do(t, c, "POST", base+"/?gzip=true", "abc")
	if resp.Header.Get("Content-Encoding") != "" || body != "abc" {
		t.Errorf("gzipped without Accept-Encoding: %v %q", resp.Header, body)
	}
}

func TestHTTPBadParams(t *testing.T) {
	base := startHTTP(t)
	for _, q := range []string{"status=abc", "delay=forever", "size=1:200", "close=maybe", "header=nocolon", "a=%zz"} {
		resp, body := do(t, h1Client(), "GET", base+"/?"+q, "")
		if resp.StatusCode != 400 || strings.Count(body, "\n") != 1 || !strings.HasPrefix(body, "meshperf echo: ") {
			t.Errorf("%s: got %d %q, want 400 and one line", q, resp.StatusCode, body)
		}
	}
}

func TestHTTPDebug(t *testing.T) {
	base := startHTTP(t)
	for name, c := range map[string]*http.Client{"h1": h1Client(), "h2c": h2cClient()} {
		resp, body := do(t, c, "POST", base+"/debug?header=X-D:1", "the body", "X-Custom", "v1")
		for _, want := range []string{"POST /debug?header=X-D:1 HTTP/", "headers:", "X-Custom: v1", "body:\n\nthe body\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: debug output lacks %q:\n%s", name, want, body)
			}
		}
		if resp.Header.Get("X-D") != "1" || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: headers %v", name, resp.Header)
		}
	}
	// Below /debug/ every path still echoes.
	if _, body := do(t, h1Client(), "POST", base+"/debug/echo/", "x"); body != "x" {
		t.Errorf("/debug/echo/ = %q, want echo", body)
	}
}

// TestH2CUpgrade speaks the HTTP/1.1 Upgrade: h2c handshake by hand.
func TestH2CUpgrade(t *testing.T) {
	addr := strings.TrimPrefix(startHTTP(t), "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = io.WriteString(conn, "GET /?header=X-Up:yes HTTP/1.1\r\nHost: x\r\n"+
		"Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade response: %v %v", resp, err)
	}
	// Now HTTP/2: send the preface and settings, read the reply to stream 1.
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, br)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading HTTP/2 frames: %v", err)
		}
		if h, ok := f.(*http2.HeadersFrame); ok && h.StreamID == 1 {
			return // the upgraded request was answered over HTTP/2
		}
	}
}
