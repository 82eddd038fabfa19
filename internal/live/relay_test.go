package live

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/meshperf/meshperf/internal/httpguard"
)

// What a pod posts through the relay reaches the dashboard addressed to
// the dashboard's own host, which its guard accepts, with the token and
// the JSON content type as sent.
func TestRelayAddressesTheDashboardByItsURL(t *testing.T) {
	var mu sync.Mutex
	var hosts, auth []string
	dash := httptest.NewServer(httpguard.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		hosts, auth = append(hosts, r.Host), append(auth, r.Header.Get("Authorization"))
		if r.URL.Path == "/api/live" {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"s1"}`))
		}
	}), httpguard.Options{Token: "s3cret"}))
	defer dash.Close()
	relay, err := StartRelay(dash.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	var warn strings.Builder
	p := Start(Config{URL: relay.URL(), Token: "s3cret", Opening: Opening{Source: SourceLoad}, Name: "meshperf load", Warn: &warn})
	p.Publish(Event{Kind: KindProgress, Calls: 1})
	p.Close()
	if warn.Len() > 0 || p.Session() != "s1" {
		t.Fatalf("publishing through the relay: session %q, warnings %q", p.Session(), warn.String())
	}
	mu.Lock()
	defer mu.Unlock()
	want := strings.TrimPrefix(dash.URL, "http://")
	for i, h := range hosts {
		if h != want || auth[i] != "Bearer s3cret" {
			t.Errorf("request %d reached the dashboard as Host %q with Authorization %q, want %q and the token", i, h, auth[i], want)
		}
	}
	if len(hosts) != 2 {
		t.Errorf("%d requests reached the dashboard, want the opening and the event", len(hosts))
	}
}
