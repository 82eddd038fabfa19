package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testutil"
)

// What users of a mesh care about most: traffic keeps flowing when the
// control plane or a sidecar restarts. These tests run real load through
// both sidecars in mTLS (in network namespaces with Istio's capture as root,
// on loopback otherwise) and restart things under it.

// reliabilityLab starts a lab set up for one run through both sidecars in
// mTLS at 1000 qps over 4 connections for d, and removes it when t ends.
func reliabilityLab(t *testing.T, d time.Duration) (*lab, scenario.RunSpec) {
	t.Helper()
	kind := testNetwork(t)
	meshperf, proxy := binaries(t)
	s, err := scenario.Get("quick")
	if err != nil {
		t.Fatal(err)
	}
	w := time.Second
	if s, err = s.Apply(scenario.Overrides{Duration: &d, Warmup: &w, QPS: []int{1000}, Connections: []int{4},
		Modes: []scenario.Mode{scenario.BothSidecars}}); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	l, err := newLab(Config{Scenario: s, MeshperfBin: meshperf, ProxyBin: proxy, Network: kind,
		OutDir: filepath.Join(t.TempDir(), "out"), Out: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.close(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if t.Failed() {
			t.Logf("lab output:\n%s", out.String())
			logTails(t, l.logDir)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.start(ctx); err != nil {
		t.Fatal(err)
	}
	spec := s.Expand()[0]
	if !spec.MTLS {
		t.Fatal("the quick scenario is no longer mTLS; this test needs it")
	}
	if err := l.ensure(ctx, spec); err != nil {
		t.Fatal(err)
	}
	return l, spec
}

// logTails logs the end of every process's log, for a failure in CI.
func logTails(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, path := range logs {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		t.Logf("%s (last lines):\n%s", filepath.Base(path), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

// startLoad starts the run's load generator in the client pod; wait
// returns its result once it has finished.
func startLoad(t *testing.T, l *lab, spec scenario.RunSpec) (wait func() results.Run) {
	t.Helper()
	jsonPath := filepath.Join(l.cfg.OutDir, "load.json")
	args := append(append([]string{"load"}, spec.LoadArgs("reliability", jsonPath)...), l.target(spec)...)
	p, err := l.client.Start(proc.Spec{Name: "load generator", Path: l.cfg.MeshperfBin, Args: args,
		LogPath: filepath.Join(l.logDir, "load.log")})
	if err != nil {
		t.Fatal(err)
	}
	return func() results.Run {
		t.Helper()
		select {
		case <-p.Done():
		case <-time.After(spec.Duration + time.Minute):
			_ = p.Stop()
			t.Fatalf("the load generator did not finish: %s", p.Tail())
		}
		if err := p.Wait(); err != nil {
			t.Fatalf("load generator: %v: %s", err, p.Tail())
		}
		r, err := results.ReadFortioFile(jsonPath)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// afterLoadStarts waits until the load has run for d: the moment a test
// breaks something is its subject, so this is a timer, not a poll.
func afterLoadStarts(d time.Duration) { <-time.After(d) }

// The control plane is killed with SIGKILL during load through both
// sidecars and restarted 5 s later on the same addresses: no request
// fails, both sidecars reconnect and acknowledge their config from the new
// control plane, and a change applied after the restart reaches them.
func TestMeshSurvivesControlPlaneKill(t *testing.T) {
	l, spec := reliabilityLab(t, 14*time.Second)
	sidecarPIDs := []int{l.clientSC.PID(), l.serverSC.PID()}
	wait := startLoad(t, l, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	afterLoadStarts(2 * time.Second)
	if err := l.pilot.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	<-time.After(5 * time.Second)
	if err := l.startPilot(ctx); err != nil {
		t.Fatalf("restart the control plane: %v", err)
	}
	testutil.Eventually(t, 30*time.Second, func() error { return bothSynced(ctx, l, killed) })

	// A change made after the restart reaches both sidecars.
	const host = "after-restart.example.com"
	if err := l.apply(ctx, "after-restart", serviceEntryYAML(host), false); err != nil {
		t.Fatal(err)
	}
	cluster := "outbound|80||" + host
	for _, a := range []*admin{newAdmin(l.client.IP()), newAdmin(l.server.IP())} {
		testutil.Eventually(t, 30*time.Second, func() error {
			d, err := a.configDump(ctx)
			if err != nil {
				return err
			}
			if _, ok := d.Clusters[cluster]; !ok {
				return fmt.Errorf("sidecar at %s has no cluster %s yet", a.base, cluster)
			}
			return nil
		})
	}

	r := wait()
	if r.Errors != 0 || r.Calls < 13000 {
		t.Errorf("%d calls, %d failed (codes %v) across the control plane's kill and restart; want about 14000 and none failed", r.Calls, r.Errors, r.Codes)
	}
	for i, p := range []*proc.Process{l.clientSC, l.serverSC} {
		if p.Exited() || p.PID() != sidecarPIDs[i] {
			t.Errorf("%s did not stay up through the control plane's restart", p.Name())
		}
	}
}

// bothSynced says whether both sidecars are connected to the control plane
// since after it was killed and have acknowledged every type it sent.
func bothSynced(ctx context.Context, l *lab, since time.Time) error {
	status, err := l.api.SyncStatus(ctx)
	if err != nil {
		return err
	}
	synced := 0
	for _, p := range status {
		if !p.ConnectedAt.After(since) {
			return fmt.Errorf("%s connected at %s, before the restart", p.ProxyID, p.ConnectedAt)
		}
		all := len(p.Types) > 0
		for _, ty := range p.Types {
			all = all && ty.Synced && ty.Nacks == 0
		}
		if all {
			synced++
		}
	}
	if synced != 2 {
		return fmt.Errorf("%d of 2 sidecars connected and acknowledged everything: %+v", synced, status)
	}
	return nil
}

func serviceEntryYAML(host string) string {
	return `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: after-restart
  namespace: ` + Namespace + `
spec:
  hosts: [` + host + `]
  location: MESH_EXTERNAL
  resolution: DNS
  ports:
  - number: 80
    name: http
    protocol: HTTP
`
}

// The client sidecar is restarted (SIGTERM, then a new one started in the
// pod) during load. The old one drains: it stops accepting, finishes what is
// in flight and closes its keep-alive connections, and exits on its own.
// The requests sent meanwhile either succeed or, while no sidecar listens,
// fail as connection errors in the generator; none is a 5xx made by a proxy.
func TestMeshSurvivesSidecarRestart(t *testing.T) {
	l, spec := reliabilityLab(t, 12*time.Second)
	wait := startLoad(t, l, spec)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	afterLoadStarts(3 * time.Second)
	old := l.clientSC
	if err := old.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The proxy's drain period is 5 s; it exits as soon as nothing is left.
	select {
	case <-old.Done():
	case <-time.After(15 * time.Second):
		t.Fatalf("the client sidecar was still running 15 s after SIGTERM: %s", old.Tail())
	}
	if err := old.Wait(); err != nil {
		t.Errorf("the drained sidecar exited with %v, want status 0: %s", err, old.LastLine())
	}
	if err := l.startSidecar(ctx, l.clientSidecarSpec(), spec, &l.clientSC); err != nil {
		t.Fatal(err)
	}
	if err := l.waitConverged(ctx, spec); err != nil {
		t.Fatal(err)
	}

	r := wait()
	var ok, refused, fromProxy int64
	for code, n := range r.Codes {
		c, err := strconv.Atoi(code)
		switch {
		case err != nil:
			t.Errorf("code %q: not a status", code)
		case c == 200:
			ok += n
		case c == -1:
			refused += n
		case c >= 500:
			fromProxy += n
		default:
			t.Errorf("%d calls answered %d", n, c)
		}
	}
	t.Logf("client sidecar restarted under 1000 qps: %d calls, %d ok, %d connection errors in the generator, %d 5xx", r.Calls, ok, refused, fromProxy)
	if fromProxy != 0 {
		t.Errorf("%d calls answered 5xx during the sidecar's restart; want none (codes %v)", fromProxy, r.Codes)
	}
	if ok < r.Calls/2 {
		t.Errorf("only %d of %d calls succeeded: traffic did not come back through the new sidecar", ok, r.Calls)
	}
}

// A short soak: samples of both sidecars' memory all along, a trend per
// sidecar, the samples in a CSV, and the run stored with no error.
func TestSoakShort(t *testing.T) {
	kind := testNetwork(t)
	meshperf, proxy := binaries(t)
	s, err := scenario.Get("soak")
	if err != nil {
		t.Fatal(err)
	}
	d, w := 4*time.Second, time.Second
	if s, err = s.Apply(scenario.Overrides{Duration: &d, Warmup: &w, QPS: []int{300}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Soak(ctx, Config{Scenario: s, MeshperfBin: meshperf, ProxyBin: proxy, Network: kind,
		OutDir: filepath.Join(dir, "out"), DBPath: filepath.Join(dir, "meshperf.db"), Out: &out}, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, out.String())
	}
	run := rep.Outcome.Run
	if run.Failed || run.Errors != 0 || run.Calls < 1000 {
		t.Errorf("soak run: failed %v (%s), %d calls, %d errors", run.Failed, run.FailureReason, run.Calls, run.Errors)
	}
	if len(rep.Samples) < 15 {
		t.Errorf("%d samples in a 4 s soak every 200 ms, want about 20", len(rep.Samples))
	}
	if len(rep.Trends) != 2 {
		t.Fatalf("trends %+v, want one per sidecar", rep.Trends)
	}
	for _, tr := range rep.Trends {
		if tr.StartMB <= 0 || tr.MaxMB < tr.EndMB || tr.Fitted < 3 {
			t.Errorf("%s: %+v", tr.Role, tr)
		}
	}
	data, err := os.ReadFile(rep.CSV)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(data), "\n"); lines != len(rep.Samples)+1 {
		t.Errorf("soak.csv has %d lines, want a header and %d samples", lines, len(rep.Samples))
	}
	st, err := OpenStore(filepath.Join(dir, "meshperf.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if runs, err := st.Runs(results.Filter{RunID: rep.Outcome.Run.RunID}); err != nil || len(runs) != 1 {
		t.Errorf("store: %d runs (%v), want the soak's one", len(runs), err)
	}
	var sb strings.Builder
	rep.Print(&sb)
	if !strings.Contains(sb.String(), "client sidecar RSS: start") || !strings.Contains(sb.String(), "MB per 10 min") {
		t.Errorf("summary:\n%s", sb.String())
	}
}

func TestSlopeAndTrends(t *testing.T) {
	if got := slope([]float64{0, 1, 2, 3}, []float64{10, 12, 14, 16}); got != 2 {
		t.Errorf("slope of a line of slope 2: %v", got)
	}
	if got := slope([]float64{5}, []float64{1}); got != 0 {
		t.Errorf("slope of one point: %v", got)
	}
	// 20 MB flat for the warm-up's growth, then 1 MB a minute: the trend
	// fits only what follows the warm-up.
	var samples []SoakSample
	for i := range 11 {
		at := time.Duration(i) * time.Minute
		rss := 20.0
		if i == 0 {
			rss = 5
		} else if i > 1 {
			rss = 20 + float64(i-1)
		}
		samples = append(samples, SoakSample{At: at, RSS: map[string]uint64{"client sidecar": uint64(rss * (1 << 20))}})
	}
	trs := trends(samples, time.Minute)
	if len(trs) != 1 {
		t.Fatalf("trends %+v, want the client sidecar's only", trs)
	}
	tr := trs[0]
	if tr.Fitted != 10 || tr.StartMB != 5 || tr.EndMB != 29 || tr.MaxMB != 29 || tr.SlopeMBPer10Min < 9.9 || tr.SlopeMBPer10Min > 10.1 {
		t.Errorf("trend %+v, want 10 fitted samples, start 5, end and max 29, about +10 MB per 10 min", tr)
	}
}
