package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/testutil"
)

// The live hub's byte bounds, as docs/dashboard.md states them.
const (
	liveItemBound    = 64 << 10 // one event or opening, as JSON
	liveSessionBound = 2 << 20  // what one session keeps
	liveTotalBound   = 32 << 20 // what every session keeps together
)

// fatEvent is a progress event whose message makes it about n bytes as JSON.
func fatEvent(n int) string {
	return fmt.Sprintf(`{"kind":"progress","calls":1,"message":%q}`, strings.Repeat("x", n-100))
}

// liveKept is what GET /api/live says each session keeps, by id.
func liveKept(t *testing.T, srv *httptest.Server) map[string]int64 {
	t.Helper()
	var list []struct {
		ID        string
		KeptBytes int64 `json:"kept_bytes"`
	}
	getJSON(t, srv, "/api/live", &list)
	kept := map[string]int64{}
	for _, s := range list {
		kept[s.ID] = s.KeptBytes
	}
	return kept
}

// keptAsJSON is what a session's opening and events take as JSON, counted
// from what a GET answers: the figure kept_bytes must equal.
func keptAsJSON(t *testing.T, srv *httptest.Server, id string, opening live.Opening) (int64, []live.Event) {
	t.Helper()
	var got struct{ Events []live.Event }
	getJSON(t, srv, "/api/live/"+id, &got)
	b, _ := json.Marshal(opening)
	n := int64(len(b))
	for _, e := range got.Events {
		b, _ := json.Marshal(e)
		n += int64(len(b))
	}
	return n, got.Events
}

// loadOpening is what openSession opens.
var loadOpening = live.Opening{Source: "load", Target: "http://127.0.0.1:8080/", Label: "a test"}

// fillSession publishes events of about size bytes to id, batched under
// the body limit, until n are sent; it returns the last status and answer.
func fillSession(t *testing.T, srv *httptest.Server, id string, n, size int) (int, []byte) {
	t.Helper()
	perBatch := (1<<20)/(size+1) - 1
	code, answer := 0, []byte(nil)
	for sent := 0; sent < n; {
		k := min(perBatch, n-sent)
		batch := "[" + strings.TrimSuffix(strings.Repeat(fatEvent(size)+",", k), ",") + "]"
		if code, answer = post(t, srv, "/api/live/"+id+"/events", "", batch); code != http.StatusOK {
			return code, answer
		}
		sent += k
	}
	return code, answer
}

// An event or an opening larger than the bound is refused, 413 in one
// line, and nothing of its batch is kept; one under it is kept, counted
// as the JSON it takes.
func TestLiveRefusesAnEventOverItsBound(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	events := "/api/live/" + id + "/events"
	before := liveKept(t, srv)[id]
	wantPostError(t, srv, events, "", fatEvent(liveItemBound+200), http.StatusRequestEntityTooLarge, "event 1 is ")
	wantPostError(t, srv, events, "", "["+fatEvent(1000)+","+fatEvent(liveItemBound+200)+"]",
		http.StatusRequestEntityTooLarge, "event 2 is ")
	// A message of control characters grows sixfold as JSON: the bound is
	// on what the event takes as JSON, not on the bytes of the body.
	escaped := fmt.Sprintf(`{"kind":"progress","message":"%s"}`, strings.Repeat(`\u0001`, liveItemBound/6+1))
	wantPostError(t, srv, events, "", escaped, http.StatusRequestEntityTooLarge, "over the 65536")
	wantPostError(t, srv, "/api/live", "", fmt.Sprintf(`{"source":"load","label":%q}`, strings.Repeat("l", liveItemBound)),
		http.StatusRequestEntityTooLarge, "the opening is ")
	if after := liveKept(t, srv); after[id] != before || len(after) != 1 {
		t.Errorf("kept bytes %v after refused events and opening, want only %s's %d", after, id, before)
	}
	if code, body := post(t, srv, events, "", fatEvent(liveItemBound-1000)); code != http.StatusOK {
		t.Fatalf("POST an event under the bound = %d %s, want 200", code, body)
	}
	want, kept := keptAsJSON(t, srv, id, loadOpening)
	if got := liveKept(t, srv)[id]; len(kept) != 1 || got != want || got < liveItemBound-1000 {
		t.Errorf("kept_bytes %d for %d events, want %d: the opening and the event as JSON", got, len(kept), want)
	}
}

// The attack on one session, 40 events of 900 KiB cut down to
// the item bound: the session keeps its latest events within its bytes,
// dropping the oldest (counted in events_evicted), and says so.
func TestLiveSessionKeepsItsLatestEventsWithinItsBytes(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	const n, size = 40, liveItemBound - 1000 // 2.5 MB in all
	if code, body := fillSession(t, srv, id, n, size); code != http.StatusOK {
		t.Fatalf("POST %d events of %d bytes = %d %s, want 200: a session drops its oldest", n, size, code, body)
	}
	want, kept := keptAsJSON(t, srv, id, loadOpening)
	var view struct {
		EventsEvicted int64 `json:"events_evicted"`
		KeptBytes     int64 `json:"kept_bytes"`
	}
	getJSON(t, srv, "/api/live/"+id, &view)
	switch {
	case view.KeptBytes != want:
		t.Errorf("kept_bytes %d, want %d: the opening and the %d kept events as JSON", view.KeptBytes, want, len(kept))
	case view.KeptBytes > liveSessionBound || view.KeptBytes < liveSessionBound-size:
		t.Errorf("kept_bytes %d, want at most the session's %d, within an event of it", view.KeptBytes, liveSessionBound)
	case len(kept) == 0 || kept[len(kept)-1].Seq != n || int64(len(kept))+view.EventsEvicted != n:
		t.Errorf("%d events kept (last seq %d), %d evicted; want the latest kept, up to seq %d, and the rest counted",
			len(kept), kept[len(kept)-1].Seq, view.EventsEvicted, n)
	}
}

// Sessions that fill the hub's total: opening more and publishing to a
// session that would grow are refused, 503 in one line, with the total
// kept within its bound; a finished session is evicted to make room.
func TestLiveHubRefusesPastItsTotal(t *testing.T) {
	srv := liveServer(t)
	const size = liveItemBound - 1000
	perSession := liveSessionBound/size + 1 // enough to reach the session's bound
	var ids []string
	refused := ""
	for len(ids) < liveTotalBound/liveSessionBound+2 && refused == "" {
		id := openSession(t, srv, "")
		ids = append(ids, id)
		code, body := fillSession(t, srv, id, perSession, size)
		for code == http.StatusServiceUnavailable && refused == "" {
			// A batch was refused whole: one event at a time fills the rest.
			if code, _ = post(t, srv, "/api/live/"+id+"/events", "", fatEvent(size)); code == http.StatusOK {
				code = http.StatusServiceUnavailable
				continue
			}
			refused = id
		}
		switch {
		case refused != "":
			var e struct{ Error string }
			if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, "past the 33554432 they keep in all") {
				t.Errorf("refused with %s, want one line naming the bound", body)
			}
		case code != http.StatusOK:
			t.Fatalf("POST to session %d = %d %s", len(ids), code, body)
		}
	}
	if refused == "" {
		t.Fatalf("%d sessions of %d bytes all taken, want a 503 past %d in all", len(ids), liveSessionBound, liveTotalBound)
	}
	total := func() (sum int64) {
		for _, n := range liveKept(t, srv) {
			sum += n
		}
		return sum
	}
	if got := total(); got > liveTotalBound || got < liveTotalBound-2*size {
		t.Errorf("the sessions keep %d bytes, want at most %d, within an event or two of it", got, liveTotalBound)
	}
	if code, body := post(t, srv, "/api/live/"+refused+"/events", "", fatEvent(size)); code != http.StatusServiceUnavailable {
		t.Errorf("POST to a growing session of a full hub = %d %s, want 503", code, body)
	}
	// The first session is at its own bound: its end drops its oldest
	// event, so it fits; then finished, it is evicted for the next event.
	if code, body := post(t, srv, "/api/live/"+ids[0]+"/events", "", `{"kind":"end"}`); code != http.StatusOK {
		t.Fatalf("POST end to a session at its bound = %d %s, want 200", code, body)
	}
	if code, body := post(t, srv, "/api/live/"+refused+"/events", "", fatEvent(size)); code != http.StatusOK {
		t.Errorf("POST after a session finished = %d %s, want 200: the finished one is evicted", code, body)
	}
	kept := liveKept(t, srv)
	if _, ok := kept[ids[0]]; ok {
		t.Errorf("finished session %s still kept, want it evicted for the running ones", ids[0])
	}
	if got := total(); got > liveTotalBound {
		t.Errorf("the sessions keep %d bytes, want at most %d", got, liveTotalBound)
	}
}

// A GET of a session at its bound (what once serialised 36 MB whole)
// allocates a few times the session's bound in all, and the other reads
// less: nothing grows with what was posted before.
func TestLiveGetOfAFullSessionStaysWithinItsBound(t *testing.T) {
	h := dashboard.New(newSeededStore(t).st, nil)
	srv := httptest.NewServer(h)
	defer srv.Close()
	id := openSession(t, srv, "")
	fillSession(t, srv, id, 40, liveItemBound-1000)
	post(t, srv, "/api/live/"+id+"/events", "", `{"kind":"end"}`) // the stream ends with it
	for path, carriesEvents := range map[string]bool{"/api/live/" + id: true, "/api/live/" + id + "/stream": true,
		"/api/live": false, "/live/" + id: false} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		w := testutil.NewDiscardWriter()
		// httptest's default Host, example.com, is not one of the
		// dashboard's names: ask as a browser on loopback does.
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
		runtime.ReadMemStats(&after)
		if w.Status != http.StatusOK || carriesEvents && w.Written < liveSessionBound-liveItemBound {
			t.Fatalf("GET %s = %d with %d bytes, want 200 and the session", path, w.Status, w.Written)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4*liveSessionBound {
			t.Errorf("GET %s allocated %d bytes for a session of at most %d, want at most %d", path, alloc, liveSessionBound, 4*liveSessionBound)
		}
	}
}
