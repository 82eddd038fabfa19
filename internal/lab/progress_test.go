package lab

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

func testSpecs(t *testing.T, reps int) []scenario.RunSpec {
	t.Helper()
	s, err := scenario.Get("quick")
	if err != nil {
		t.Fatal(err)
	}
	d := 10 * time.Second
	s, err = s.Apply(scenario.Overrides{Duration: &d, Repetitions: &reps, QPS: []int{0, 500}})
	if err != nil {
		t.Fatal(err)
	}
	return s.Expand()
}

func TestProgressLine(t *testing.T) {
	specs := testSpecs(t, 1) // 4 modes x 2 rates, 10 s + 2 s cool-down each
	if got, want := ProgressLine(specs, 0), "run 1/8: no-mesh, 4 conn, max qps, http (1m36s left)"; got != want {
		t.Errorf("first line:\n got %q\nwant %q", got, want)
	}
	if got, want := ProgressLine(specs, 7), "run 8/8: both-sidecars, 4 conn, 500 qps, http (12s left)"; got != want {
		t.Errorf("last line:\n got %q\nwant %q", got, want)
	}
	specs = testSpecs(t, 2)
	if got := ProgressLine(specs, 9); !strings.Contains(got, "run 10/16: no-mesh, 4 conn, 500 qps") || !strings.Contains(got, "repetition 2/2") {
		t.Errorf("repetition line: %q", got)
	}
}

func TestProgressOutputPlainAndTTY(t *testing.T) {
	specs := testSpecs(t, 1)[:2]
	ok := Outcome{Run: results.Run{Label: "x_qps_max_c_4_1024_baseline", ActualQPS: 999.5,
		Latency: results.Latency{P50: 0.1, P90: 0.2, P99: 0.3}}}
	bad := Outcome{Run: results.Run{Label: "x_qps_500_c_4_1024_baseline", Failed: true, FailureReason: "server sidecar (pid 7) exited: signal: killed"}}

	var plain bytes.Buffer
	p := newProgress(&plain, false, specs)
	p.start(0)
	p.done(ok)
	p.start(1)
	p.done(bad)
	p.finish()
	want := "run 1/2: no-mesh, 4 conn, max qps, http (24s left)\n" +
		"  x_qps_max_c_4_1024_baseline: 999.5 qps, p50 0.100 ms, p90 0.200 ms, p99 0.300 ms, 0.0% errors\n" +
		"run 2/2: no-mesh, 4 conn, 500 qps, http (12s left)\n" +
		"  x_qps_500_c_4_1024_baseline: FAILED: server sidecar (pid 7) exited: signal: killed\n"
	if plain.String() != want {
		t.Errorf("plain output:\n got %q\nwant %q", plain.String(), want)
	}
	if strings.Contains(plain.String(), "\r") || strings.Contains(plain.String(), "\033") {
		t.Error("plain output has terminal control characters")
	}

	var tty bytes.Buffer
	p = newProgress(&tty, true, specs)
	p.start(0)
	if got := tty.String(); got != "\r\033[Krun 1/2: no-mesh, 4 conn, max qps, http (24s left)" {
		t.Errorf("live line: %q", got)
	}
	p.done(ok)
	if !strings.HasSuffix(tty.String(), "\r\033[K  x_qps_max_c_4_1024_baseline: 999.5 qps, p50 0.100 ms, p90 0.200 ms, p99 0.300 ms, 0.0% errors\n") {
		t.Errorf("the live line is not cleared before the result: %q", tty.String())
	}
}

func TestResultLineShowsChecks(t *testing.T) {
	o := Outcome{Run: results.Run{Label: "l"}, Checks: []Check{{Name: "server sidecar", OK: true, Detail: "404 requests counted, want >= 400"}}}
	if got := ResultLine(o); !strings.HasSuffix(got, "; checks: server sidecar 404 requests counted, want >= 400") {
		t.Errorf("result line: %q", got)
	}
}

func TestSumMetricMatchesWholeLabels(t *testing.T) {
	text := `# TYPE istio_requests_total counter
istio_requests_total{reporter="destination",source_principal="spiffe://cluster.local/ns/lab/sa/client",destination_service="unknown",destination_service_name="server",connection_security_policy="mutual_tls"} 400
istio_requests_total{reporter="destination",source_principal="unknown",destination_service="server.lab.svc.cluster.local",connection_security_policy="none"} 3
istio_requests_total_other{reporter="destination"} 99
`
	if got := sumMetric(text, "istio_requests_total", map[string]string{"reporter": "destination"}); got != 403 {
		t.Errorf("all destination requests: %v, want 403", got)
	}
	got := sumMetric(text, "istio_requests_total", map[string]string{"connection_security_policy": "mutual_tls", "source_principal": SPIFFEID(ClientSA)})
	if got != 400 {
		t.Errorf("mTLS from client: %v, want 400", got)
	}
	// destination_service="server" must not match destination_service_name="server".
	if got := sumMetric(text, "istio_requests_total", map[string]string{"destination_service": "server"}); got != 0 {
		t.Errorf("label matched inside another label: %v", got)
	}
}

func TestTrafficChecks(t *testing.T) {
	line := func(labels string, n int) string {
		return "istio_requests_total{" + labels + "} " + strconv.Itoa(n) + "\n"
	}
	src := `reporter="source",destination_service="server.lab.svc.cluster.local"`
	dst := `reporter="destination",source_principal="spiffe://cluster.local/ns/lab/sa/client",connection_security_policy="mutual_tls"`
	before := metricsSnapshot{client: line(src, 10), server: line(dst, 10)}
	after := metricsSnapshot{client: line(src, 2014), server: line(dst, 2014)}
	spec := scenario.RunSpec{Mode: scenario.BothSidecars, MTLS: true, Protocol: scenario.HTTP, Connections: 4}
	checks := trafficChecks(spec, 2000, before, after)
	if len(checks) != 3 {
		t.Fatalf("both sidecars with mTLS: %d checks, want 3: %+v", len(checks), checks)
	}
	for _, c := range checks {
		if !c.OK {
			t.Errorf("check failed: %+v", c)
		}
	}
	// Traffic that bypassed the client sidecar fails its check.
	checks = trafficChecks(spec, 2000, before, metricsSnapshot{client: before.client, server: after.server})
	if checks[0].OK || !strings.Contains(checks[0].Detail, "0 requests counted, want >= 2000") {
		t.Errorf("bypassed client sidecar passed: %+v", checks[0])
	}
	if n := len(trafficChecks(scenario.RunSpec{Mode: scenario.NoMesh}, 2000, before, after)); n != 0 {
		t.Errorf("no-mesh has %d checks, want none", n)
	}
	// A gRPC run counts only calls the sidecars saw as gRPC: these were
	// counted as plain HTTP, so every check fails.
	spec.Protocol = scenario.GRPC
	for _, c := range trafficChecks(spec, 2000, before, after) {
		if c.OK || !strings.Contains(c.Detail, "0 gRPC requests counted") {
			t.Errorf("gRPC check passed on HTTP counts: %+v", c)
		}
	}
	grpc := func(labels string) string { return labels + `,request_protocol="grpc"` }
	before = metricsSnapshot{client: line(grpc(src), 0), server: line(grpc(dst), 0)}
	after = metricsSnapshot{client: line(grpc(src), 2000), server: line(grpc(dst), 2000)}
	for _, c := range trafficChecks(spec, 2000, before, after) {
		if !c.OK {
			t.Errorf("gRPC check failed on gRPC counts: %+v", c)
		}
	}
}

func TestConvergenceChecks(t *testing.T) {
	var d configDump
	dump := `{"clusters": {"outbound|8080||server.lab.svc.cluster.local": {"transport": {"auto": {}}}},
	  "endpoints": {"outbound|8080||server.lab.svc.cluster.local": {"endpoints": [{"address": {"socket": "10.233.0.3:8080"}, "tls_mode": "istio"}]}},
	  "listeners": {"virtualInbound": {"filter_chains": [
	    {"filter_chain_match": {"destination_port": 8080, "transport_protocol": "tls"}},
	    {"filter_chain_match": {"destination_port": null, "transport_protocol": null}}]}}}`
	if err := json.Unmarshal([]byte(dump), &d); err != nil {
		t.Fatal(err)
	}
	ep := netip.MustParseAddrPort("10.233.0.3:8080")
	both := scenario.RunSpec{Mode: scenario.BothSidecars, MTLS: true, Protocol: scenario.HTTP}
	if lack := clientConverged(&d, both, ep); lack != "" {
		t.Errorf("client with the server's mTLS endpoint: %s", lack)
	}
	if lack := serverConverged(&d, both, 8080); lack != "" {
		t.Errorf("STRICT server: %s", lack)
	}
	// client-sidecar: the server has no sidecar, so its endpoint must not
	// be marked for mTLS yet.
	if lack := clientConverged(&d, scenario.RunSpec{Mode: scenario.ClientSidecar, Protocol: scenario.HTTP}, ep); !strings.Contains(lack, "tlsMode=none") {
		t.Errorf("client-sidecar accepted an istio endpoint: %q", lack)
	}
	// PERMISSIVE needs a plain-text chain on the port too.
	if lack := serverConverged(&d, scenario.RunSpec{Mode: scenario.ServerSidecar, Protocol: scenario.HTTP}, 8080); !strings.Contains(lack, "PERMISSIVE") {
		t.Errorf("server-sidecar accepted a STRICT-only listener: %q", lack)
	}
	// mTLS off in both-sidecars wants a plain-text cluster.
	off := scenario.RunSpec{Mode: scenario.BothSidecars, Protocol: scenario.HTTP}
	if lack := clientConverged(&d, off, ep); !strings.Contains(lack, "plain-text transport") {
		t.Errorf("mTLS off accepted an auto-mTLS cluster: %q", lack)
	}
}
