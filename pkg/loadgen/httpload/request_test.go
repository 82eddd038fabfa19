package httpload

import (
	"strings"
	"testing"
)

// The User-Agent is the caller's (the meshperf command puts its version
// there), else DefaultUserAgent, and -H User-Agent beats both, on HTTP/1.x
// as on HTTP/2.
func TestUserAgent(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"default", Options{URL: "http://127.0.0.1:8080/echo"}, "meshperf"},
		{"set by the caller", Options{URL: "http://127.0.0.1:8080/echo", UserAgent: "meshperf/v1.2.3"}, "meshperf/v1.2.3"},
		{"-H wins", Options{URL: "http://127.0.0.1:8080/echo", UserAgent: "meshperf/v1.2.3", Headers: []string{"User-Agent: curl/8"}}, "curl/8"},
	} {
		tg, hs, err := c.o.validate()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		req := string(wireRequest(c.o, tg, hs))
		if n := strings.Count(req, "User-Agent: "); n != 1 || !strings.Contains(req, "\r\nUser-Agent: "+c.want+"\r\n") {
			t.Errorf("%s: HTTP/1.1 request has %d User-Agent lines, want one with %q:\n%s", c.name, n, c.want, req)
		}
		h2, err := newHTTP2Conn(c.o, tg, hs, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := h2.template.Header.Values("User-Agent"); len(got) != 1 || got[0] != c.want {
			t.Errorf("%s: HTTP/2 User-Agent %q, want %q", c.name, got, c.want)
		}
	}
}
