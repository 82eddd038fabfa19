package dashboard_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/dashboard"
)

// Every route answers only to the dashboard's own names: a page on a
// rebound name reads nothing, pages and API alike.
func TestEveryRouteRefusesAForeignHost(t *testing.T) {
	srv := liveServer(t, dashboard.WithAllowedHosts("dash.internal:8088", []string{"dash.example.com"}))
	for _, path := range []string{"/", "/api/runs", "/api/", "/api/live", "/live", "/static/live.js", "/no/such/page"} {
		code, body := send(t, srv, http.MethodGet, path, "", map[string]string{"Host": "evil.test:8088"})
		if code != http.StatusForbidden || !strings.Contains(errorLine(t, body), "refused as DNS rebinding") {
			t.Errorf("GET %s with a foreign Host = %d %s, want 403 naming DNS rebinding", path, code, body)
		}
	}
	for _, host := range []string{"", "127.0.0.1:8088", "localhost:8088", "dash.internal:8088", "dash.example.com"} {
		if code, body := send(t, srv, http.MethodGet, "/api/runs", "", map[string]string{"Host": host}); code != http.StatusOK {
			t.Errorf("GET /api/runs with Host %q = %d %s, want 200", host, code, body)
		}
	}
}

// What a page of another site sends to open a session or start a run is
// refused, and opens nothing, even on loopback without a token.
func TestAWebPageCannotStartOrPublish(t *testing.T) {
	srv := liveServer(t)
	for _, c := range []struct {
		name    string
		path    string
		headers map[string]string
		want    int
	}{
		{"a no-cors fetch", "/api/live", map[string]string{"Content-Type": "text/plain;charset=UTF-8",
			"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Origin": "http://evil.test"}, http.StatusForbidden},
		{"a form, enctype=text/plain", "/api/live/start", map[string]string{"Content-Type": "text/plain"}, http.StatusUnsupportedMediaType},
		{"a urlencoded form", "/api/live", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, http.StatusUnsupportedMediaType},
		{"a cross-site JSON fetch", "/api/live", map[string]string{"Content-Type": "application/json",
			"Origin": "http://evil.test"}, http.StatusForbidden},
		{"a rebound name", "/api/live", map[string]string{"Content-Type": "application/json",
			"Host": "evil.test:8088", "Sec-Fetch-Site": "same-origin"}, http.StatusForbidden},
	} {
		code, body := send(t, srv, http.MethodPost, c.path, `{"source":"load"}`, c.headers)
		if code != c.want {
			t.Errorf("%s: POST %s = %d %s, want %d", c.name, c.path, code, body, c.want)
		}
		errorLine(t, body)
	}
	var sessions []json.RawMessage
	getJSON(t, srv, "/api/live", &sessions)
	if len(sessions) != 0 {
		t.Errorf("%d live sessions after refused POSTs, want none", len(sessions))
	}
	// The dashboard's own page, a same-origin fetch with JSON, is served.
	code, body := send(t, srv, http.MethodPost, "/api/live", `{"source":"load"}`, map[string]string{"Content-Type": "application/json",
		"Sec-Fetch-Site": "same-origin", "Origin": srv.URL})
	if code != http.StatusCreated {
		t.Errorf("same-origin POST /api/live = %d %s, want 201", code, body)
	}
}

// errorLine is the message of a one-line JSON error answer.
func errorLine(t *testing.T, body []byte) string {
	t.Helper()
	var e struct{ Error string }
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || strings.Contains(e.Error, "\n") {
		t.Errorf("answer %s: want one JSON error line", body)
	}
	return e.Error
}
