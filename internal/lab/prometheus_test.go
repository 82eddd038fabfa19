package lab

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/deploy/grafana"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv"
)

// How far Prometheus' figures may be from the /proc sampler's for the same
// process over the same window. Both read the kernel's counters, but at
// different instants (every 250ms here against the sampler's 500ms and the
// window's edges), and rate() extrapolates to the window's edges, so over a
// window of a few seconds CPU may differ by tens of percent; resident
// memory hardly moves within a run. The request rate is the proxy's own
// count against the load generator's.
const (
	promCPUFactor = 2.0
	promRSSFactor = 1.25
	promRPSFactor = 1.5
)

// A lab run with --prometheus stores, for every sidecar of each run, its
// CPU, memory, request rate and percentiles as the lab's Prometheus read
// them, agreeing with the /proc figures within the factors above; and
// every query of the shipped Grafana dashboards evaluates against that
// Prometheus, the main ones finding data from the real pilot and proxies.
func TestLabPrometheusFigures(t *testing.T) {
	testenv.NeedNetns(t)
	testenv.NeedCommand(t, "prometheus", "prometheus")
	s := tinyScenario(t, []scenario.Mode{scenario.ServerSidecar, scenario.BothSidecars}, nil)
	d, w := 4*time.Second, time.Second
	s, err := s.Apply(scenario.Overrides{Duration: &d, Warmup: &w})
	if err != nil {
		t.Fatal(err)
	}
	runs, queried := 0, 0
	hook := func(event string, l *lab, spec scenario.RunSpec) {
		if event != "run-done" {
			return
		}
		if runs++; runs == len(s.Expand()) {
			queried = checkDashboardQueries(t, l)
		}
	}
	rep := runConfig(t, Config{Scenario: s, Network: pod.KindNetns, Prometheus: true, PromInterval: 250 * time.Millisecond, hook: hook})
	if len(rep.Outcomes) != 2 {
		t.Fatalf("%d runs, want 2", len(rep.Outcomes))
	}
	if queried < 30 {
		t.Errorf("%d dashboard queries evaluated against the lab's Prometheus; the dashboards have more", queried)
	}
	for _, o := range rep.Outcomes {
		r := o.Run
		if r.Failed {
			t.Fatalf("%s failed: %s", r.Label, r.FailureReason)
		}
		checkPromFigures(t, r)
	}
	st, err := results.Open(rep.DB)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored, err := st.Runs(results.Filter{RunID: rep.RunID})
	if err != nil || len(stored) != 2 {
		t.Fatalf("stored %d runs, %v", len(stored), err)
	}
	for i, r := range stored {
		if len(r.Prometheus) != len(rep.Outcomes[i].Run.Prometheus) || len(r.Prometheus) == 0 {
			t.Errorf("%s: stored Prometheus figures %+v, ran with %+v", r.Label, r.Prometheus, rep.Outcomes[i].Run.Prometheus)
		}
	}
	html, err := os.ReadFile(rep.HTML)
	if err != nil || !strings.Contains(string(html), `<table id="prometheus">`) || !strings.Contains(string(html), "server-sidecar") {
		t.Errorf("report without the Prometheus vs /proc table (%v)", err)
	}
}

// checkPromFigures compares a run's Prometheus figures with its /proc ones.
func checkPromFigures(t *testing.T, r results.Run) {
	t.Helper()
	want := map[string]bool{}
	for _, p := range r.Processes {
		if p.ProxyKind() != "" {
			want[p.Role] = true
		}
	}
	if len(want) == 0 || len(r.Prometheus) != len(want) {
		t.Fatalf("%s: Prometheus figures for %d proxies, want one for each of %v: %+v", r.Label, len(r.Prometheus), want, r.Prometheus)
	}
	within := func(a, b, factor float64) bool { return a > 0 && b > 0 && a <= b*factor && b <= a*factor }
	for _, pair := range r.PromVsProc() {
		prom, proc := pair.Prom, pair.Proc
		t.Logf("%s %s: vCPU %.4f (/proc %.4f), RSS %.1f MiB (/proc %.1f), %.0f rps (load %.0f), P50/P90/P99 %.2f/%.2f/%.2f ms",
			r.Label, prom.Role, prom.VCPU, proc.VCPU, prom.RSSMB, proc.RSSMB, prom.RPS, r.ActualQPS, prom.P50, prom.P90, prom.P99)
		if !want[prom.Role] {
			t.Errorf("%s: figures for %s, which the run did not have", r.Label, prom.Role)
		}
		if !within(prom.VCPU, proc.VCPU, promCPUFactor) {
			t.Errorf("%s %s: Prometheus vCPU %.4f, /proc %.4f: more than %gx apart", r.Label, prom.Role, prom.VCPU, proc.VCPU, promCPUFactor)
		}
		if !within(prom.RSSMB, proc.RSSMB, promRSSFactor) || prom.MaxRSSMB < prom.RSSMB {
			t.Errorf("%s %s: Prometheus RSS %.1f MiB (max %.1f), /proc %.1f: more than %gx apart", r.Label, prom.Role, prom.RSSMB, prom.MaxRSSMB, proc.RSSMB, promRSSFactor)
		}
		if !within(prom.RPS, r.ActualQPS, promRPSFactor) {
			t.Errorf("%s %s: the proxy reported %.1f rps, the load generator sent %.1f", r.Label, prom.Role, prom.RPS, r.ActualQPS)
		}
		if math.IsNaN(prom.P50) || math.IsNaN(prom.P99) || prom.P50 <= 0 || prom.P50 > prom.P90 || prom.P90 > prom.P99 {
			t.Errorf("%s %s: percentiles %v/%v/%v ms", r.Label, prom.Role, prom.P50, prom.P90, prom.P99)
		}
	}
}

// dashboardHasData are the dashboards' queries that must find series in a
// lab run with sidecars and HTTP load: the golden signals of each.
var dashboardHasData = map[string]bool{
	"Connected proxies": true, "Pushes by type": true, "CPU": true, "Memory": true,
	"Request rate by source, destination and code": true, "Request duration P50 / P90 / P99": true,
	"CPU per proxy": true, "Memory per proxy": true,
}

// checkDashboardQueries evaluates every query of the shipped dashboards
// against the lab's Prometheus, which has scraped the run's pilot and
// proxies: none may fail, and the golden signals must find data.
func checkDashboardQueries(t *testing.T, l *lab) (queried int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	vars := map[string]string{"pilot_job": promJobPilot, "proxy_job": promJobProxies, "reporter": ".*"}
	if grafana.DefaultVariables["pilot_job"] != vars["pilot_job"] || grafana.DefaultVariables["proxy_job"] != vars["proxy_job"] {
		t.Errorf("the dashboards' default jobs %v are not the lab's Prometheus jobs %v", grafana.DefaultVariables, vars)
	}
	for _, name := range grafana.Files() {
		qs, err := grafana.Queries(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			n, err := l.prom.SeriesCount(ctx, grafana.Expand(q.Expr, "1m", vars), time.Time{})
			queried++
			if err != nil {
				t.Errorf("%s %q: %v", name, q.Panel, err)
			} else if dashboardHasData[q.Panel] && n == 0 {
				t.Errorf("%s %q %s: no data from the lab's pilot and proxies: %s", name, q.Panel, q.RefID, q.Expr)
			}
		}
	}
	return queried
}
