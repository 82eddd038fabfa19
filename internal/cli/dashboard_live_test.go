package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/proc"
)

// startCommand runs a serving command in process until the test ends and
// returns the address of its http listener from its ready file.
func startCommand(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (addr string, stdout, stderr *syncBuffer) {
	t.Helper()
	r, stdout, stderr := startCommandReady(t, run, args...)
	addr, err := r.Listener(listenerHTTP)
	if err != nil {
		t.Fatal(err)
	}
	return addr, stdout, stderr
}

// startCommandReady is startCommand returning the whole ready file.
func startCommandReady(t *testing.T, run func(context.Context, []string, io.Writer, io.Writer) int, args ...string) (r proc.Ready, stdout, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	readyFile := filepath.Join(t.TempDir(), "ready")
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append(args, "-ready-file", readyFile), stdout, stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d after stop; stderr %q", code, stderr.String())
		}
	})
	return waitReadyFile(t, readyFile), stdout, stderr
}

// liveSession is a session as GET /api/live/{id} answers it.
type liveSession struct {
	ID, Source, Target, State string
	Events                    []live.Event
}

// A real load publishes to a real dashboard: the session it opens gets a
// start, progress with calls rising and percentiles so far, and the end
// with the run's figures, while the load's own output stays as it was.
func TestLoadPublishesItsProgressToTheDashboard(t *testing.T) {
	s := newLabStore(t)
	dash, _, _ := startCommand(t, runDashboard, "--db", s.path, "--listen", "127.0.0.1:0")
	echoAddr, _, _ := startCommand(t, runServer, "-http-port", "127.0.0.1:0", "-tcp-port", "disabled", "-grpc-port", "disabled")
	target := "http://" + echoAddr + "/?delay=1ms"
	code, stdout, stderr := runLoadT(t, "-qps", "200", "-c", "2", "-t", "3500ms", "-quiet", "-dashboard", "http://"+dash, target)
	if code != exitOK || stderr != "" {
		t.Fatalf("load exit %d, stderr %q; want 0 and nothing on stderr", code, stderr)
	}
	if !strings.Contains(stdout, "All done") && !strings.Contains(stdout, "calls") {
		t.Errorf("load's summary is missing: %q", stdout)
	}
	var list []liveSession
	getLive(t, dash, "/api/live", &list)
	if len(list) != 1 || list[0].Source != "load" || list[0].Target != target || list[0].State != "done" {
		t.Fatalf("sessions = %+v, want one done load session for %s", list, target)
	}
	var got liveSession
	getLive(t, dash, "/api/live/"+list[0].ID, &got)
	var kinds []string
	var progress []live.Event
	for _, e := range got.Events {
		kinds = append(kinds, e.Kind)
		if e.Kind == live.KindProgress {
			progress = append(progress, e)
		}
	}
	if len(got.Events) < 2 || got.Events[0].Kind != live.KindStart || got.Events[len(got.Events)-1].Kind != live.KindEnd {
		t.Fatalf("events %v: want start first and end last", kinds)
	}
	if len(progress) < 3 {
		t.Fatalf("events %v: want a progress event a second over 3.5 s", kinds)
	}
	for i, e := range progress {
		if e.TargetQPS != 200 || e.DurationS != 3.5 || e.P50Ms <= 0 || e.P90Ms < e.P50Ms || e.P99Ms < e.P90Ms || e.QPS <= 0 {
			t.Errorf("progress %d = %+v: want target 200 qps over 3.5 s, a rate, and 0 < p50 <= p90 <= p99", i, e)
		}
		// The last sample, taken as the run stops, may add none.
		if i > 0 && (e.Calls < progress[i-1].Calls || (i < len(progress)-1 && e.Calls == progress[i-1].Calls)) {
			t.Errorf("progress %d: %d calls after %d, want them rising", i, e.Calls, progress[i-1].Calls)
		}
	}
	// The 1 ms the echo server waits is in every latency.
	if p50 := progress[len(progress)-1].P50Ms; p50 < 1 {
		t.Errorf("p50 so far %.3f ms, want at least the 1 ms delay", p50)
	}
	end := got.Events[len(got.Events)-1]
	if end.Calls < progress[len(progress)-1].Calls || end.Calls < 500 || end.QPS < 100 || end.P99Ms < 1 {
		t.Errorf("end %+v: want the whole run's calls (about 700), rate and p99", end)
	}
}

func getLive(t *testing.T, addr, path string, out any) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", path, resp.StatusCode, err)
	}
}

// A dashboard that is not there costs the run one warning line: the load
// succeeds, with its result, on time.
func TestLoadGoesOnWithoutTheDashboard(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close() // nothing listens there now: connections are refused
	echoAddr, _, _ := startCommand(t, runServer, "-http-port", "127.0.0.1:0", "-tcp-port", "disabled", "-grpc-port", "disabled")
	code, stdout, stderr := runLoadT(t, "-qps", "100", "-c", "2", "-t", "2s", "-quiet", "-json", "-", "-dashboard", "http://"+gone, "http://"+echoAddr+"/")
	if code != exitOK {
		t.Fatalf("load exit %d without its dashboard, want 0; stderr %q", code, stderr)
	}
	var result struct{ DurationHistogram struct{ Count int64 } }
	if err := json.Unmarshal([]byte(stdout), &result); err != nil || result.DurationHistogram.Count < 150 {
		t.Errorf("result %v %.200s: want the run's ~200 calls", err, stdout)
	}
	// With -json - the summary is on stderr too: the warning is the one
	// line about the dashboard.
	want := "meshperf load: dashboard http://" + gone + ": "
	var warnings []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, "dashboard") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.HasPrefix(warnings[0], want) || !strings.Contains(warnings[0], "connection refused") ||
		!strings.HasSuffix(warnings[0], "the run goes on without publishing its progress") {
		t.Errorf("stderr %q: want one warning line starting %q", stderr, want)
	}
}

// Off loopback the dashboard makes up a token and says it once; a load
// publishes with it (from the environment) and is refused without it.
func TestDashboardOffLoopbackRequiresAToken(t *testing.T) {
	t.Setenv(live.TokenEnv, "")
	s := newLabStore(t)
	dash, stdout, _ := startCommand(t, runDashboard, "--db", s.path, "--listen", "0.0.0.0:0")
	var token string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if _, tok, ok := strings.Cut(line, "POSTs need this token (Authorization: Bearer, or --dashboard-token): "); ok {
			token = tok
		}
	}
	if len(token) != 32 {
		t.Fatalf("stdout %q: want the generated token printed once", stdout.String())
	}
	_, port, _ := net.SplitHostPort(dash)
	url := "http://127.0.0.1:" + port
	echoAddr, _, _ := startCommand(t, runServer, "-http-port", "127.0.0.1:0", "-tcp-port", "disabled", "-grpc-port", "disabled")
	code, _, stderr := runLoadT(t, "-qps", "50", "-t", "1s", "-quiet", "-dashboard", url, "http://"+echoAddr+"/")
	if code != exitOK || !strings.Contains(stderr, "401 Unauthorized /api/live: POST /api/live needs this server's token") {
		t.Errorf("load without the token: exit %d, stderr %q; want 0 and the dashboard's refusal as the warning", code, stderr)
	}
	t.Setenv(live.TokenEnv, token)
	code, _, stderr = runLoadT(t, "-qps", "50", "-t", "1s", "-quiet", "-dashboard", url, "http://"+echoAddr+"/")
	if code != exitOK || stderr != "" {
		t.Errorf("load with the token from %s: exit %d, stderr %q; want 0 and no warning", live.TokenEnv, code, stderr)
	}
	var list []liveSession
	getLive(t, "127.0.0.1:"+port, "/api/live", &list)
	if len(list) != 1 || list[0].State != "done" {
		t.Errorf("sessions %+v: want only the load that had the token, done", list)
	}
}

func TestLoadDashboardFlagsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-dashboard", "127.0.0.1:8088"}, `-dashboard: "127.0.0.1:8088" is not the dashboard's URL: want http://host:port`},
		{[]string{"-dashboard-session", "abc"}, "-dashboard-token and -dashboard-session need -dashboard URL"},
	} {
		code, _, stderr := runLoadT(t, append(c.args, "http://127.0.0.1:1/")...)
		if code != exitBadInput || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("load %v: exit %d, stderr %q; want 2 and one line with %q", c.args, code, stderr, c.want)
		}
	}
}
