package live

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// A dashboard that accepts connections but never answers: Publish never
// waits, what the queue cannot hold is dropped and counted, Close gives up
// on the rest, and the one warning says what happened.
func TestPublisherNeverWaitsForAHungDashboard(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		<-release
	}))
	defer hung.Close()
	defer close(release)
	// Read after Close, which waits for the publisher's goroutine.
	var warn strings.Builder
	p := Start(Config{URL: hung.URL, Session: "abc", Name: "meshperf load", Warn: &warn})
	// One event first, and its POST hung at the dashboard: the sender holds
	// that one and takes no more, so the burst meets a queue of exactly
	// queueLength. (Without waiting, the sender may drain any part of the
	// burst into its first batch before it blocks.)
	p.Publish(Event{Kind: KindProgress, Calls: 1})
	<-arrived
	const burst = queueLength + 50
	for range burst {
		p.Publish(Event{Kind: KindProgress, Calls: 1})
	}
	const n = burst + 1
	if d := p.Dropped(); d != burst-queueLength {
		t.Errorf("%d dropped of %d published into a queue of %d behind a hung POST, want the overflow (%d) counted", d, burst, queueLength, burst-queueLength)
	}
	p.Close()
	p.Publish(Event{Kind: KindProgress}) // after Close: dropped, not a panic
	if d := p.Dropped(); d != n+1 {
		t.Errorf("%d dropped after Close, want all %d: none reached the dashboard", d, n+1)
	}
	if got := warn.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "meshperf load: dashboard "+hung.URL+": ") {
		t.Errorf("warnings %q, want one line naming the dashboard", got)
	}
}

// Events published together go in one request, in order, with the token.
func TestPublisherBatchesInOrderWithTheToken(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			k, err := r.Body.Read(buf)
			b.Write(buf[:k])
			if err != nil {
				break
			}
		}
		auth = append(auth, r.Header.Get("Authorization"))
		if r.URL.Path == "/api/live" {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":"s1"}`))
			return
		}
		bodies = append(bodies, r.URL.Path+" "+b.String())
	}))
	defer srv.Close()
	p := Start(Config{URL: srv.URL + "/", Token: "t0k", Opening: Opening{Source: SourceLoad}})
	if id := p.Session(); id != "s1" {
		t.Fatalf("session %q, want s1", id)
	}
	p.Publish(Event{Kind: KindStart})
	p.Publish(Event{Kind: KindProgress, Calls: 7})
	p.Publish(Event{Kind: KindEnd, Calls: 9})
	p.Close()
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(bodies, "\n")
	if !strings.HasPrefix(all, "/api/live/s1/events [") || strings.Index(all, `"start"`) > strings.Index(all, `"calls":7`) ||
		strings.Index(all, `"calls":7`) > strings.Index(all, `"end"`) || p.Dropped() != 0 {
		t.Errorf("posted %s (dropped %d), want the events in order to the session", all, p.Dropped())
	}
	for _, a := range auth {
		if a != "Bearer t0k" {
			t.Errorf("Authorization %q, want the bearer token on every request", a)
		}
	}
}
