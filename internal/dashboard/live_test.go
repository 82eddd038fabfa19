package dashboard_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/testutil"
)

// liveServer is a dashboard over an empty store, with the options given.
func liveServer(t *testing.T, opts ...dashboard.Option) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(dashboard.New(newSeededStore(t).st, nil, opts...))
	t.Cleanup(srv.Close)
	return srv
}

// post sends body to path as JSON, with the token when given, and returns
// the status and the answer.
func post(t *testing.T, srv *httptest.Server, path, token, body string) (int, []byte) {
	t.Helper()
	headers := map[string]string{"Content-Type": "application/json"}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	return send(t, srv, http.MethodPost, path, body, headers)
}

// send makes one request to the dashboard with the headers given ("Host"
// sets the Host) and returns the status and the answer.
func send(t *testing.T, srv *httptest.Server, method, path, body string, headers map[string]string) (int, []byte) {
	t.Helper()
	return testutil.Send(t, method, srv.URL+path, body, headers)
}

// openSession opens a load session and returns its id.
func openSession(t *testing.T, srv *httptest.Server, token string) string {
	t.Helper()
	code, body := post(t, srv, "/api/live", token, `{"source":"load","target":"http://127.0.0.1:8080/","label":"a test"}`)
	var answer struct{ ID string }
	if err := json.Unmarshal(body, &answer); err != nil || code != http.StatusCreated || answer.ID == "" {
		t.Fatalf("POST /api/live = %d %s, want 201 and an id", code, body)
	}
	return answer.ID
}

// wantPostError checks a refused POST: its status and a one-line JSON error.
func wantPostError(t *testing.T, srv *httptest.Server, path, token, body string, status int, msg string) {
	t.Helper()
	code, answer := post(t, srv, path, token, body)
	var e struct{ Error string }
	if err := json.Unmarshal(answer, &e); err != nil || code != status || !strings.Contains(e.Error, msg) || strings.Contains(e.Error, "\n") {
		t.Errorf("POST %s %s = %d %s, want %d and an error line containing %q", path, body, code, answer, status, msg)
	}
}

func TestLiveSessionFromOpeningToEnd(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	events := "/api/live/" + id + "/events"
	if code, body := post(t, srv, events, "", `{"kind":"start","target_qps":100,"duration_s":5}`); code != http.StatusOK {
		t.Fatalf("POST start = %d %s", code, body)
	}
	code, body := post(t, srv, events, "", `[{"kind":"progress","calls":100,"qps":99.5,"p50_ms":0.4,"p90_ms":0.8,"p99_ms":1.5},
		{"kind":"progress","calls":200,"qps":100.2,"p50_ms":0.5,"p90_ms":0.9,"p99_ms":1.7}]`)
	if code != http.StatusOK || !strings.Contains(string(body), `"last_seq": 3`) {
		t.Fatalf("POST two progress events = %d %s, want 200 and last_seq 3", code, body)
	}
	var list []struct {
		ID, Source, Target, State string
		LastEvent                 live.Event `json:"last_event"`
	}
	getJSON(t, srv, "/api/live", &list)
	if len(list) != 1 || list[0].ID != id || list[0].Source != "load" || list[0].State != "running" || list[0].LastEvent.Calls != 200 {
		t.Errorf("GET /api/live = %+v, want the running session with its last event (200 calls)", list)
	}
	if code, body := post(t, srv, events, "", `{"kind":"end","calls":250}`); code != http.StatusOK {
		t.Fatalf("POST end = %d %s", code, body)
	}
	var got struct {
		State  string
		Events []live.Event
	}
	getJSON(t, srv, "/api/live/"+id, &got)
	var seqs, kinds []string
	for _, e := range got.Events {
		seqs, kinds = append(seqs, strconv.FormatInt(e.Seq, 10)), append(kinds, e.Kind)
		if e.Time.IsZero() {
			t.Errorf("event %d has no time: the server stamps one", e.Seq)
		}
	}
	if got.State != "done" || strings.Join(seqs, ",") != "1,2,3,4" || strings.Join(kinds, ",") != "start,progress,progress,end" {
		t.Errorf("session = %s with seqs %v kinds %v, want done with 1-4: start, progress, progress, end", got.State, seqs, kinds)
	}
	wantPostError(t, srv, events, "", `{"kind":"progress","calls":300}`, http.StatusConflict, "has ended")

	// An error ends a session as failed, and nothing is half-applied: a
	// batch with an event after its end is refused whole.
	other := openSession(t, srv, "")
	wantPostError(t, srv, "/api/live/"+other+"/events", "", `[{"kind":"error","message":"boom"},{"kind":"progress"}]`,
		http.StatusConflict, "has ended")
	got.Events = nil
	getJSON(t, srv, "/api/live/"+other, &got)
	if got.State != "running" || got.Events == nil || len(got.Events) != 0 {
		t.Errorf("after a refused batch: %s with %d events, want running with none", got.State, len(got.Events))
	}
	post(t, srv, "/api/live/"+other+"/events", "", `{"kind":"error","message":"target refused"}`)
	getJSON(t, srv, "/api/live/"+other, &got)
	if got.State != "failed" {
		t.Errorf("after an error event: %s, want failed", got.State)
	}
	getJSON(t, srv, "/api/live", &list)
	if len(list) != 2 || list[0].ID != other || list[1].ID != id {
		t.Errorf("GET /api/live lists %+v, want the newest first when none runs", list)
	}
}

func TestLiveBadRequests(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	events := "/api/live/" + id + "/events"
	for _, c := range []struct{ path, body, msg string }{
		{"/api/live", `{"source":"fortio"}`, `source "fortio": want load or lab`},
		{"/api/live", `{"source":"load"`, "body is not the JSON wanted"},
		{"/api/live", `{"source":"load","colour":"red"}`, `unknown field "colour"`},
		{"/api/live", `{"source":"load"} {}`, "more than one JSON value"},
		{events, `{"kind":"finished"}`, `event 1: event kind "finished": want start, run, progress`},
		{events, `[{"kind":"progress"},{"kind":"progress","calls":-1}]`, "event 2: event calls -1: must not be negative"},
		{events, `[]`, "no events in the body"},
		{events, `not json`, "body is not the JSON wanted"},
		{events + "?x=1", `{"kind":"progress"}`, `unknown query parameter "x"`},
		{"/api/live/start", `{"scenario":"quick"}`, "this dashboard starts no runs"},
	} {
		status := http.StatusBadRequest
		if c.path == "/api/live/start" {
			status = http.StatusNotFound
		}
		wantPostError(t, srv, c.path, "", c.body, status, c.msg)
	}
	wantPostError(t, srv, "/api/live/nosuch/events", "", `{"kind":"progress"}`, http.StatusNotFound, `no live session "nosuch"`)
	wantError(t, srv, "/api/live/nosuch", http.StatusNotFound, `no live session "nosuch"`)
	wantError(t, srv, "/api/live/nosuch/stream", http.StatusNotFound, `no live session "nosuch"`)
	wantPage(t, srv, "/live/nosuch", http.StatusNotFound, `no live session &#34;nosuch&#34;`)
	wantError(t, srv, "/live/nosuch/chart.svg", http.StatusNotFound, `no live session "nosuch"`)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/live/"+id+"/stream", nil)
	req.Header.Set("Last-Event-ID", "three")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `Last-Event-ID \"three\"`) {
		t.Errorf("stream with Last-Event-ID three = %d %s, want 400", resp.StatusCode, body)
	}
}

func TestLiveTokenGuardsEveryPost(t *testing.T) {
	srv := liveServer(t, dashboard.WithToken("s3cret"))
	for _, token := range []string{"", "wrong"} {
		wantPostError(t, srv, "/api/live", token, `{"source":"load"}`, http.StatusUnauthorized, "send Authorization: Bearer TOKEN")
		wantPostError(t, srv, "/api/live/start", token, `{"scenario":"quick"}`, http.StatusUnauthorized, "send Authorization: Bearer TOKEN")
	}
	id := openSession(t, srv, "s3cret")
	wantPostError(t, srv, "/api/live/"+id+"/events", "", `{"kind":"progress"}`, http.StatusUnauthorized, "token")
	if code, body := post(t, srv, "/api/live/"+id+"/events", "s3cret", `{"kind":"progress","calls":5}`); code != http.StatusOK {
		t.Errorf("POST an event with the token = %d %s, want 200", code, body)
	}
	// Reading needs no token: the token guards what changes or starts.
	var list []struct{ ID string }
	getJSON(t, srv, "/api/live", &list)
	if len(list) != 1 || list[0].ID != id {
		t.Errorf("GET /api/live = %+v, want the session", list)
	}
}

// sseEvent is one event read from a stream.
type sseEvent struct {
	id    string
	event live.Event
}

// readStream reads server-sent events from path (after lastID, if not
// empty) onto a channel, closed when the server ends the stream.
func readStream(t *testing.T, srv *httptest.Server, path, lastID string) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s = %d %s, want 200 text/event-stream", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	out := make(chan sseEvent, 16)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var cur sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				cur.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.event); err != nil {
					t.Errorf("stream data %q: %v", line, err)
				}
			case line == "" && cur.id != "":
				out <- cur
				cur = sseEvent{}
			}
		}
	}()
	return out
}

// next is the stream's next event, failing after a while without one.
func next(t *testing.T, events <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case e, ok := <-events:
		if !ok {
			t.Fatal("the stream ended early")
		}
		return e
	case <-time.After(10 * time.Second):
		t.Fatal("no event on the stream within 10s")
	}
	return sseEvent{}
}

func TestLiveStreamReplaysFollowsAndEnds(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	events := "/api/live/" + id + "/events"
	post(t, srv, events, "", `[{"kind":"start"},{"kind":"progress","calls":10}]`)
	stream := readStream(t, srv, "/api/live/"+id+"/stream", "")
	for want := 1; want <= 2; want++ {
		if e := next(t, stream); e.id != strconv.Itoa(want) || e.event.Seq != int64(want) {
			t.Errorf("replayed event %+v, want id and seq %d", e, want)
		}
	}
	// Posted while the reader follows: it arrives on the open stream.
	post(t, srv, events, "", `{"kind":"progress","calls":20,"p99_ms":2.5}`)
	if e := next(t, stream); e.id != "3" || e.event.Calls != 20 || e.event.P99Ms != 2.5 {
		t.Errorf("followed event %+v, want seq 3 with 20 calls and p99 2.5 ms", e)
	}
	post(t, srv, events, "", `{"kind":"end","calls":30}`)
	if e := next(t, stream); e.event.Kind != "end" {
		t.Errorf("last event %+v, want the end", e)
	}
	select {
	case e, ok := <-stream:
		if ok {
			t.Errorf("event %+v after the end, want the stream to end", e)
		}
	case <-time.After(10 * time.Second):
		t.Error("the stream did not end with its session")
	}

	// A reader that reconnects says what it has seen: it gets the rest.
	resumed := readStream(t, srv, "/api/live/"+id+"/stream", "2")
	var got []string
	for e := range resumed {
		got = append(got, e.id+":"+e.event.Kind)
	}
	if strings.Join(got, " ") != "3:progress 4:end" {
		t.Errorf("after Last-Event-ID 2 the stream sent %v, want 3:progress 4:end", got)
	}
}

func TestLivePagesShowTheSession(t *testing.T) {
	srv := liveServer(t)
	id := openSession(t, srv, "")
	post(t, srv, "/api/live/"+id+"/events", "", `[{"kind":"start","target_qps":100},
		{"kind":"progress","calls":100,"qps":99,"p99_ms":1.5},{"kind":"progress","calls":200,"qps":101,"p99_ms":1.7}]`)
	code, ctype, body := get(t, srv, "/live")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(string(body), `href="/live/`+id+`"`) {
		t.Errorf("GET /live = %d %s, want an HTML page linking the session:\n%s", code, ctype, body)
	}
	code, ctype, body = get(t, srv, "/live/"+id)
	for _, want := range []string{`id="live-state"`, `id="live-run"`, `id="live-qps"`, `id="live-p50"`, `id="live-p90"`,
		`id="live-p99"`, `id="live-calls"`, `id="live-chart"><svg`, `data-session="` + id + `"`, `src="/static/live.js"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /live/%s lacks %s:\n%.3000s", id, want, body)
		}
	}
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
		t.Errorf("GET /live/%s = %d %s, want an HTML page", id, code, ctype)
	}
	code, ctype, body = get(t, srv, "/live/"+id+"/chart.svg")
	// Each panel draws the two progress events as a line with a point each.
	if code != http.StatusOK || ctype != "image/svg+xml" || !strings.Contains(string(body), ">Rate<") ||
		!strings.Contains(string(body), ">P99 so far<") {
		t.Errorf("GET chart.svg = %d %s, want an SVG with the rate and P99 panels:\n%.400s", code, ctype, body)
	}
	code, ctype, _ = get(t, srv, "/static/live.js")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/javascript") {
		t.Errorf("GET /static/live.js = %d %s", code, ctype)
	}
}
