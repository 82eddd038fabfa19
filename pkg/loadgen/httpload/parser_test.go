package httpload

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// feed gives the parser data in pieces of at most `piece` bytes, as a socket
// might, and reports where the response ended.
func feed(p *responseParser, data []byte, piece int) (used int, done bool, status int, err error) {
	for used < len(data) {
		end := min(used+piece, len(data))
		n, d, out, e := p.Feed(data[used:end])
		used += n
		if e != nil || d {
			return used, d, out.Code, e
		}
		if n == 0 {
			return used, false, 0, errors.New("no progress")
		}
	}
	if d, out := p.PeerClosed(); d {
		return used, true, out.Code, nil
	}
	return used, false, 0, nil
}

func newParser() *responseParser {
	p := &responseParser{}
	p.Reset()
	return p
}

func TestResponseParserFramesResponses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		resp       string
		headOnly   bool
		wantStatus int
		wantLen    int // bytes of the response; -1: all of it
		keepAlive  bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false, 200, -1, true},
		{"chunked with extension and trailer",
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nX-T: 1\r\n\r\n", false, 200, -1, true},
		{"HTTP/1.0 closes", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi", false, 200, -1, false},
		{"HTTP/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi", false, 200, -1, true},
		{"connection close", "HTTP/1.1 503 No\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, 503, -1, false},
		{"no content", "HTTP/1.1 204 No Content\r\n\r\n", false, 204, -1, true},
		{"HEAD has no body", "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", true, 200, -1, true},
		{"interim 100 then 200", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx", false, 201, -1, true},
		{"body until close", "HTTP/1.1 200 OK\r\n\r\nuntil the end", false, 200, -1, false},
		{"stops at the end of the response", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nxEXTRA", false, 200, 39, true},
		{"bare LF line ends", "HTTP/1.1 200 OK\nContent-Length: 2\n\nok", false, 200, -1, true},
	} {
		for _, piece := range []int{1, 3, 7, 1 << 20} {
			p := newParser()
			p.headOnly = tc.headOnly
			used, done, status, err := feed(p, []byte(tc.resp), piece)
			want := tc.wantLen
			if want < 0 {
				want = len(tc.resp)
			}
			if err != nil || !done || status != tc.wantStatus || used != want {
				t.Errorf("%s (pieces of %d): used %d done %v status %d err %v; want %d bytes, status %d",
					tc.name, piece, used, done, status, err, want, tc.wantStatus)
			}
			if p.KeepAlive() != tc.keepAlive {
				t.Errorf("%s: keep-alive %v, want %v", tc.name, p.KeepAlive(), tc.keepAlive)
			}
			if total, _ := p.Sizes(); total != int64(want) {
				t.Errorf("%s: size %d, want %d", tc.name, total, want)
			}
		}
	}
}

func TestResponseParserHeaderSize(t *testing.T) {
	head := "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n"
	p := newParser()
	if _, done, _, err := feed(p, []byte(head+strings.Repeat("x", 1024)), 100); !done || err != nil {
		t.Fatalf("done %v err %v", done, err)
	}
	if total, header := p.Sizes(); total != int64(len(head)+1024) || header != int64(len(head)) {
		t.Errorf("sizes %d/%d, want %d/%d", total, header, len(head)+1024, len(head))
	}
}

func TestResponseParserRejectsGarbage(t *testing.T) {
	for _, bad := range []string{
		"SSH-2.0-OpenSSH\r\n",
		"HTTP/1.1 2000 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n",
		"HTTP/1.1 200 OK\r\n" + strings.Repeat("X", maxHeaderBytes+1),
	} {
		if _, done, _, err := feed(newParser(), []byte(bad), 5); err == nil || done {
			t.Errorf("%.40q: accepted (done %v)", bad, done)
		}
	}
}

func TestResponseParserIsReusable(t *testing.T) {
	p := newParser()
	one := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
	two := []byte("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nnop")
	for i := 0; i < 3; i++ {
		for _, r := range [][]byte{one, two} {
			p.Reset()
			if used, done, _, err := feed(p, r, 4); !done || err != nil || used != len(r) {
				t.Fatalf("round %d: used %d done %v err %v", i, used, done, err)
			}
		}
	}
}

// FuzzResponseParser checks the parser against net/http on the same bytes: when
// net/http reads a complete response, the parser must find the same status and
// the same end, whatever pieces the bytes come in. It must never panic.
func FuzzResponseParser(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.0 404 Not Found\r\n\r\nbody",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		p := newParser()
		used, done, status, err := feed(p, data, int(piece)+1)
		if used > len(data) {
			t.Fatalf("used %d of %d bytes", used, len(data))
		}
		counter := &countingReader{r: bytes.NewReader(data)}
		br := bufio.NewReader(counter)
		resp, herr := http.ReadResponse(br, &http.Request{Method: "GET"})
		if herr != nil || resp.StatusCode < 200 {
			return // the parser may be more lenient than net/http; it only must not panic
		}
		_, herr = io.Copy(io.Discard, resp.Body)
		if herr != nil {
			return
		}
		end := int(counter.n) - br.Buffered()
		if err != nil || !done || status != resp.StatusCode || used != end {
			t.Fatalf("net/http: status %d, %d bytes; parser: status %d, %d bytes, done %v, err %v",
				resp.StatusCode, end, status, used, done, err)
		}
	})
}
