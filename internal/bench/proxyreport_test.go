package bench

import (
	"encoding/json"
	"math"
	"net/netip"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// figures is a run of a subject with the costs that matter here.
func figures(rps, p50, p90, p99, vcpu, syscalls float64) runFigures {
	return runFigures{RPS: rps, P50: p50, P90: p90, P99: p99, P999: p99 * 2, VCPU: vcpu, UserVCPU: vcpu / 2, SysCPU: vcpu / 2,
		RSSMB: 10, Syscalls: syscalls, Voluntary: 1, Involuntary: 0.5, Allocations: math.NaN()}
}

func TestProxyCaseAddedLatencyAndRatios(t *testing.T) {
	c := newProxyCase(CasePlaintext, scenario.HTTP, 1000, ProxyConfig{Connections: 4, Size: 1024, Repeats: 3})
	// Round 2's machine was slow for everyone: added latency is taken
	// against the same round's no-proxy run, so it does not move.
	for round, slow := range []float64{0, 1, 0} {
		c.add(SubjectNoProxy, round+1, figures(1000, 0.2+slow, 0.3+slow, 0.5+slow, 0, 0))
		c.add(SubjectMeshperf, round+1, figures(1000, 0.3+slow, 0.45+slow, 0.75+slow, 0.050, 5))
		c.add(SubjectHAProxy, round+1, figures(1000, 0.3+slow, 0.40+slow, 0.7+slow, 0.044, 8))
	}
	got := c.finish()
	var ours SubjectMedians
	for _, s := range got.Subjects {
		if s.Subject == SubjectMeshperf {
			ours = s
		}
	}
	if ours.Mode != "meshperf-proxy" || !near(ours.Medians[figAddedP90], 0.15) || !near(ours.Medians[figAddedP99], 0.25) || !near(ours.Medians[figVCPU], 0.05) {
		t.Errorf("meshperf-proxy's medians %+v", ours)
	}
	ratios := map[string]Ratio{}
	for _, r := range got.Ratios {
		ratios[r.Key] = r
	}
	cpu := ratios["plaintext http 1000qps vcpu-per-1k"]
	if !near(cpu.Value, 0.050/0.044) || cpu.Target != 0.9 || cpu.Met() {
		t.Errorf("cpu ratio %+v", cpu)
	}
	if p90 := ratios["plaintext http 1000qps added-p90"]; !near(p90.Value, 1.5) || p90.Target != 1.0 {
		t.Errorf("added P90 ratio %+v", p90)
	}
	if p99 := ratios["plaintext http 1000qps added-p99"]; !near(p99.Value, 1.25) || p99.Target != 1.5 || !p99.Met() {
		t.Errorf("added P99 ratio %+v", p99)
	}
	if _, ok := ratios["plaintext http 1000qps rps"]; ok {
		t.Error("a rate ratio at a set rate")
	}
}

// HAProxy's run beating the no-proxy one (noise) gives no ratio rather
// than a negative one that would read as a win.
func TestProxyCaseNegativePeer(t *testing.T) {
	c := newProxyCase(CaseMTLS, scenario.H2, 0, ProxyConfig{Repeats: 1})
	c.add(SubjectNoProxy, 1, figures(20000, 0.5, 0.6, 2, 0, 0))
	c.add(SubjectMeshperf, 1, figures(9000, 0.6, 0.9, 2.5, 0.5, 5))
	c.add(SubjectHAProxy, 1, figures(10000, 0.6, 0.8, 1.5, 0.5, 8))
	got := c.finish()
	for _, r := range got.Ratios {
		switch r.Key {
		case "mtls h2 max added-p99", "mtls h2 max added-p99.9":
			if !math.IsNaN(r.Value) || r.String() != "n/a" {
				t.Errorf("ratio against a negative added P99: %+v", r)
			}
		case "mtls h2 max rps":
			if !near(r.Value, 0.9) || !r.HigherIsBetter || r.Target != 0 {
				t.Errorf("mTLS rate ratio %+v", r)
			}
		}
	}
	if got.Subjects[1].Mode != "meshperf-proxy-mtls-h2" {
		t.Errorf("mode %q", got.Subjects[1].Mode)
	}
	report := &ProxyReport{Repeats: 1, Threads: 2, Cases: []ProxyCase{got}}
	var b strings.Builder
	if err := report.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"mTLS between two proxies, HTTP/2 (h2c), max rate", "rate 0.90x", "added P99 n/a", "allocs/req"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	// JSON has no NaN: -json writes unknowns as null.
	data, err := results.MarshalNaN(report)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Cases []struct {
			Ratios []struct {
				Key   string   `json:"key"`
				Value *float64 `json:"ratio"`
				Met   *bool    `json:"met"`
				Noisy *bool    `json:"noisy"`
			} `json:"ratios"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &back); err != nil || len(back.Cases) != 1 {
		t.Fatalf("report JSON: %v\n%s", err, data)
	}
	for _, r := range back.Cases[0].Ratios {
		if (r.Value == nil) != strings.HasPrefix(r.Key, "mtls h2 max added-p99") {
			t.Errorf("ratio %s: %v", r.Key, r.Value)
		}
		if r.Met == nil || r.Noisy == nil {
			t.Errorf("ratio %s: no met or noisy in the JSON", r.Key)
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

func TestHAProxyConfig(t *testing.T) {
	server := netip.MustParseAddrPort("127.1.0.4:41000")
	app := netip.MustParseAddrPort("127.0.0.1:41000")
	plain := haproxyConfig{threads: 2, bind: server, h2: true, upstream: app, upstreamH2: true}.render()
	for _, want := range []string{"nbthread 2", "bind 127.1.0.4:41000 proto h2\n", "server upstream 127.0.0.1:41000 proto h2\n"} {
		if !strings.Contains(plain, want) {
			t.Errorf("h2c one hop lacks %q:\n%s", want, plain)
		}
	}
	tls := &haproxyTLS{cert: "/c.pem", root: "/root.pem"}
	serverSide := haproxyConfig{threads: 2, bind: server, tls: tls, upstream: app}.render()
	if !strings.Contains(serverSide, "bind 127.1.0.4:41000 ssl crt /c.pem ca-file /root.pem verify required alpn h2,http/1.1\n") ||
		!strings.Contains(serverSide, "server upstream 127.0.0.1:41000\n") {
		t.Errorf("mTLS server side:\n%s", serverSide)
	}
	clientSide := haproxyConfig{threads: 2, bind: netip.MustParseAddrPort("127.1.0.3:8080"), upstream: server, upstreamTLS: tls}.render()
	if !strings.Contains(clientSide, "server upstream 127.1.0.4:41000 ssl crt /c.pem ca-file /root.pem verify required alpn http/1.1\n") ||
		!strings.Contains(clientSide, "bind 127.1.0.3:8080\n") {
		t.Errorf("mTLS client side:\n%s", clientSide)
	}
}

func TestCounterTotal(t *testing.T) {
	text := "# TYPE meshperf_proxy_allocations_total counter\nmeshperf_proxy_allocations_total{worker=\"0\"} 100\n" +
		"meshperf_proxy_allocations_total{worker=\"1\"} 23.5\nmeshperf_proxy_allocations_totalx 7\n"
	if v, ok := counterTotal(text, allocationsMetric); !ok || v != 123.5 {
		t.Errorf("labelled: %v, %v", v, ok)
	}
	if v, ok := counterTotal("meshperf_proxy_allocations_total 42\n", allocationsMetric); !ok || v != 42 {
		t.Errorf("bare: %v, %v", v, ok)
	}
	if _, ok := counterTotal("istio_requests_total 5\n", allocationsMetric); ok {
		t.Error("found in a text without it")
	}
}
