package httpguard

import (
	"mime"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

// Whatever a client puts in Host, Origin, Sec-Fetch-Site, Content-Type and
// Authorization, the guard never panics, answers a refusal in one line,
// and lets a request through only as its rules say: a Host that is an IP,
// localhost or an allowed name; for a write, a JSON type, no other site's
// Sec-Fetch-Site, and the token. `go test ./internal/httpguard -fuzz
// FuzzGuard`.
func FuzzGuard(f *testing.F) {
	f.Add(true, "127.0.0.1:8088", "", "", "application/json", "Bearer t0ken")
	f.Add(true, "evil.test:8088", "http://evil.test:8088", "same-origin", "application/json", "Bearer t0ken")
	f.Add(true, "[::1]:1", "http://[::1]:1", "", "text/plain", "")
	f.Add(false, "dash.example.com.", "", "cross-site", "", "")
	f.Add(true, "LOCALHOST", "null", "none", "application/json; charset=utf-8", "Bearer t0ken ")
	f.Add(true, "a.localhost:1", "", "", "application/JSON;;", "bearer t0ken")
	f.Fuzz(func(t *testing.T, write bool, host, origin, site, contentType, authorization string) {
		method := http.MethodGet
		if write {
			method = http.MethodPost
		}
		req := httptest.NewRequest(method, "http://127.0.0.1/api/x", strings.NewReader("{}"))
		req.Host = host
		for name, v := range map[string]string{"Origin": origin, "Sec-Fetch-Site": site, "Content-Type": contentType, "Authorization": authorization} {
			if v != "" {
				req.Header.Set(name, v)
			}
		}
		reached := false
		h := Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached = true }),
			Options{AllowedHosts: []string{"dash.example.com"}, Token: "t0ken"})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !reached {
			if body := strings.TrimSuffix(rec.Body.String(), "\n"); strings.Contains(body, "\n") || rec.Code < 400 {
				t.Fatalf("refused with %d and body %q; want a 4xx and one line", rec.Code, body)
			}
			return
		}
		if h := canonicalHost(host); host != "" && h != "localhost" && !strings.HasSuffix(h, ".localhost") && h != "dash.example.com" {
			if _, err := netip.ParseAddr(h); err != nil {
				t.Fatalf("Host %q reached the handler", host)
			}
		}
		if !write {
			return
		}
		if mt, _, err := mime.ParseMediaType(contentType); err != nil || !strings.EqualFold(mt, JSON) {
			t.Fatalf("a write with Content-Type %q reached the handler", contentType)
		}
		if site != "" && site != "same-origin" && site != "none" {
			t.Fatalf("a write with Sec-Fetch-Site %q reached the handler", site)
		}
		if authorization != "Bearer t0ken" {
			t.Fatalf("a write with Authorization %q reached the handler", authorization)
		}
	})
}
