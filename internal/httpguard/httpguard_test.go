package httpguard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// request describes one request a test sends through the guard.
type request struct {
	name    string
	method  string
	path    string
	host    string
	headers map[string]string
}

// serve sends req through a guard with o and says whether it reached the
// handler behind, with the guard's answer when it did not.
func serve(t *testing.T, o Options, req request) (reached bool, code int, errMsg string, rec *httptest.ResponseRecorder) {
	t.Helper()
	h := Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		w.WriteHeader(http.StatusNoContent)
	}), o)
	method, path := req.method, req.path
	if method == "" {
		method = http.MethodGet
	}
	if path == "" {
		path = "/api/thing"
	}
	r := httptest.NewRequest(method, path, strings.NewReader("{}"))
	r.Host = req.host
	for k, v := range req.headers {
		r.Header.Set(k, v)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	if !reached {
		body := rec.Body.String()
		var e struct{ Error string }
		if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error == "" || strings.Count(body, "\n") != 1 {
			t.Errorf("%s: refusal body %q, want one line of JSON {\"error\": ...}", req.name, body)
		}
		errMsg = e.Error
	}
	return reached, rec.Code, errMsg, rec
}

var jsonWrite = map[string]string{"Content-Type": "application/json"}

func TestForeignHostsAreRefusedOnEveryMethod(t *testing.T) {
	o := Options{BindAddress: "127.0.0.1:8088", AllowedHosts: []string{"dash.example.com"}}
	for _, host := range []string{"evil.example", "evil.example:8088", "EVIL.example.", "localhost.evil.example",
		"127.0.0.1.nip.io:8088", "dash.example.com.evil.example", "example.com"} {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			req := request{name: method + " Host " + host, method: method, host: host, headers: jsonWrite}
			reached, code, msg, _ := serve(t, o, req)
			if reached || code != http.StatusForbidden || !strings.Contains(msg, "refused as DNS rebinding") {
				t.Errorf("%s: reached %v, %d %q; want 403 naming DNS rebinding", req.name, reached, code, msg)
			}
		}
	}
}

func TestTheServersOwnNamesAreAccepted(t *testing.T) {
	o := Options{BindAddress: "dash.internal:8088", AllowedHosts: []string{"dash.example.com", "Other.Example"}}
	for _, host := range []string{"", "127.0.0.1", "127.0.0.1:8088", "[::1]:8088", "[::1]", "::1", "10.1.2.3:80", "[fe80::1]:80",
		"localhost", "localhost:8088", "LOCALHOST.:8088", "app.localhost:3000", "dash.internal:8088", "Dash.Internal.",
		"dash.example.com", "dash.example.com:443", "other.example"} {
		if reached, code, msg, _ := serve(t, o, request{name: "Host " + host, host: host}); !reached {
			t.Errorf("GET with Host %q: %d %q, want it served", host, code, msg)
		}
	}
}

func TestAnyHostAcceptsEveryName(t *testing.T) {
	o := Options{AllowedHosts: []string{AnyHost}}
	if reached, code, msg, _ := serve(t, o, request{name: "Host evil.example", host: "evil.example", method: http.MethodPost, headers: jsonWrite}); !reached {
		t.Errorf("with %s: %d %q, want any Host served", AnyHost, code, msg)
	}
}

// A Host too long to quote whole is quoted as a prefix: a refusal never
// grows with what the client sent.
func TestARefusedHostIsQuotedAsAPrefix(t *testing.T) {
	host := strings.Repeat("a", 5000) + ".example"
	_, code, msg, rec := serve(t, Options{}, request{name: "long Host", host: host})
	if code != http.StatusForbidden || rec.Body.Len() > 600 || !strings.Contains(msg, "(5008 bytes)") {
		t.Errorf("long Host: %d, %d bytes; want 403 of at most 600 bytes naming the size", code, rec.Body.Len())
	}
}

func TestCrossSiteWritesAreRefused(t *testing.T) {
	for _, req := range []request{
		{name: "no-cors fetch from another site", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.test:9000", "Content-Type": "text/plain"}},
		{name: "JSON from another site", headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Content-Type": "application/json"}},
		{name: "another port of the same host", headers: map[string]string{"Sec-Fetch-Site": "same-site", "Content-Type": "application/json"}},
		{name: "a browser without Sec-Fetch-Site, foreign Origin", headers: map[string]string{"Origin": "http://evil.test:9000", "Content-Type": "application/json"}},
	} {
		req.method, req.host = http.MethodPost, "127.0.0.1:8088"
		reached, code, msg, _ := serve(t, Options{}, req)
		if reached || code != http.StatusForbidden || !strings.Contains(msg, "cross-site request forgery") {
			t.Errorf("%s: reached %v, %d %q; want 403 naming cross-site request forgery", req.name, reached, code, msg)
		}
	}
}

func TestWritesNeedAContentTypeNoFormCanSend(t *testing.T) {
	for _, ct := range []string{"", "text/plain", "text/plain; charset=utf-8", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=x", "application/json-seq", "not a type;;"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			req := request{name: method + " " + ct, method: method, host: "127.0.0.1:8088"}
			if ct != "" {
				req.headers = map[string]string{"Content-Type": ct}
			}
			reached, code, msg, _ := serve(t, Options{}, req)
			if reached || code != http.StatusUnsupportedMediaType || !strings.Contains(msg, "send Content-Type: application/json") {
				t.Errorf("%s: reached %v, %d %q; want 415 naming application/json", req.name, reached, code, msg)
			}
		}
	}
}

func TestWritesOfTheServersTypesPass(t *testing.T) {
	yamlToo := Options{WriteTypes: append([]string{JSON}, YAMLTypes...)}
	for _, c := range []struct {
		o  Options
		ct string
	}{
		{Options{}, "application/json"}, {Options{}, "Application/JSON; charset=utf-8"},
		{yamlToo, "application/yaml"}, {yamlToo, "application/x-yaml"}, {yamlToo, "text/yaml; charset=utf-8"}, {yamlToo, "application/json"},
	} {
		for _, headers := range []map[string]string{
			{"Content-Type": c.ct}, // curl, Go clients: no browser headers
			{"Content-Type": c.ct, "Sec-Fetch-Site": "same-origin", "Origin": "http://127.0.0.1:8088"}, // the server's own page
			{"Content-Type": c.ct, "Sec-Fetch-Site": "none"},                                           // typed in by the user
			{"Content-Type": c.ct, "Origin": "http://127.0.0.1:8088"},                                  // an older browser, same origin
		} {
			req := request{name: "POST " + c.ct, method: http.MethodPost, host: "127.0.0.1:8088", headers: headers}
			if reached, code, msg, _ := serve(t, c.o, req); !reached {
				t.Errorf("POST %v: %d %q, want it served", headers, code, msg)
			}
		}
	}
	if reached, code, _, _ := serve(t, Options{}, request{name: "YAML where JSON is wanted", method: http.MethodPost,
		host: "127.0.0.1", headers: map[string]string{"Content-Type": "application/yaml"}}); reached || code != http.StatusUnsupportedMediaType {
		t.Errorf("YAML to a JSON-only server: reached %v, %d; want 415", reached, code)
	}
}

func TestTheTokenGuardsWritesAndTokenPaths(t *testing.T) {
	o := Options{Token: "s3cret", TokenHelp: "--token", TokenPaths: []string{"/debug/"}}
	for _, c := range []struct {
		req  request
		want int // 0: served
	}{
		{request{name: "write without the token", method: http.MethodPost, headers: jsonWrite}, http.StatusUnauthorized},
		{request{name: "write with a wrong token", method: http.MethodPost,
			headers: map[string]string{"Content-Type": JSON, "Authorization": "Bearer s3cre"}}, http.StatusUnauthorized},
		{request{name: "write with a longer token", method: http.MethodPost,
			headers: map[string]string{"Content-Type": JSON, "Authorization": "Bearer s3crets3cret"}}, http.StatusUnauthorized},
		{request{name: "write with the token in Basic", method: http.MethodPost,
			headers: map[string]string{"Content-Type": JSON, "Authorization": "Basic s3cret"}}, http.StatusUnauthorized},
		{request{name: "write with the token", method: http.MethodPost,
			headers: map[string]string{"Content-Type": JSON, "Authorization": "Bearer s3cret"}}, 0},
		{request{name: "debug read without the token", path: "/debug/syncz"}, http.StatusUnauthorized},
		{request{name: "debug read with the token", path: "/debug/syncz", headers: map[string]string{"Authorization": "Bearer s3cret"}}, 0},
		{request{name: "plain read without the token", path: "/api/v1/resources/vs"}, 0},
	} {
		c.req.host = "127.0.0.1:15016"
		reached, code, msg, rec := serve(t, o, c.req)
		switch {
		case c.want == 0 && !reached:
			t.Errorf("%s: %d %q, want it served", c.req.name, code, msg)
		case c.want != 0 && (reached || code != c.want || !strings.Contains(msg, "--token")):
			t.Errorf("%s: reached %v, %d %q; want %d naming where the token comes from", c.req.name, reached, code, msg, c.want)
		case c.want == http.StatusUnauthorized && rec.Header().Get("WWW-Authenticate") != "Bearer":
			t.Errorf("%s: WWW-Authenticate %q, want Bearer", c.req.name, rec.Header().Get("WWW-Authenticate"))
		}
	}
}

// Without a token, writes need only the Host, origin and content type.
func TestWithoutATokenWritesNeedNone(t *testing.T) {
	if reached, code, msg, _ := serve(t, Options{TokenPaths: []string{"/debug/"}}, request{name: "debug", path: "/debug/syncz", host: "127.0.0.1"}); !reached {
		t.Errorf("debug read on a server without a token: %d %q, want it served", code, msg)
	}
}

func TestParseAllowedHosts(t *testing.T) {
	got, err := ParseAllowedHosts(" pilot.example.com, Dash.Example., *,,mesh_perf ")
	if err != nil || strings.Join(got, ",") != "pilot.example.com,Dash.Example.,*,mesh_perf" {
		t.Errorf("ParseAllowedHosts = %q, %v", got, err)
	}
	for _, bad := range []string{"http://pilot.example.com", "pilot.example.com:8080", "a..b", "a/b", "a b", strings.Repeat("a", 64) + ".com"} {
		if _, err := ParseAllowedHosts(bad); err == nil || !strings.HasPrefix(err.Error(), "not a host name") {
			t.Errorf("ParseAllowedHosts(%q) = %v, want an error saying it is not a host name", bad, err)
		}
		if _, err := ParseAllowedHosts("ok.example," + bad); err == nil || !strings.HasPrefix(err.Error(), fmt.Sprintf("%q is not a host name", bad)) {
			t.Errorf("ParseAllowedHosts(ok.example,%q) = %v, want an error naming the bad entry", bad, err)
		}
	}
}

func TestNewTokenIsRandomHex(t *testing.T) {
	a, err := NewToken()
	b, _ := NewToken()
	if err != nil || len(a) != 32 || a == b || strings.Trim(a, "0123456789abcdef") != "" {
		t.Errorf("NewToken = %q, %q, %v; want two different 32-digit hex tokens", a, b, err)
	}
}
