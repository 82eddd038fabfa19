package lab

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
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
	p := newProgress(&plain, false, specs, nil, "")
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
	p = newProgress(&tty, true, specs, nil, "")
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
	if got := SumMetric(text, "istio_requests_total", map[string]string{"reporter": "destination"}); got != 403 {
		t.Errorf("all destination requests: %v, want 403", got)
	}
	got := SumMetric(text, "istio_requests_total", map[string]string{"connection_security_policy": "mutual_tls", "source_principal": SPIFFEID(ClientSA)})
	if got != 400 {
		t.Errorf("mTLS from client: %v, want 400", got)
	}
	// destination_service="server" must not match destination_service_name="server".
	if got := SumMetric(text, "istio_requests_total", map[string]string{"destination_service": "server"}); got != 0 {
		t.Errorf("label matched inside another label: %v", got)
	}
}

func TestTrafficChecks(t *testing.T) {
	line := func(labels string, n int) string {
		return "istio_requests_total{" + labels + "} " + strconv.Itoa(n) + "\n"
	}
	src := `reporter="source",destination_service="server.lab.svc.cluster.local"`
	dst := `reporter="destination",source_principal="spiffe://cluster.local/ns/lab/sa/client",connection_security_policy="mutual_tls"`
	before := MetricsSnapshot{Client: line(src, 10), Server: line(dst, 10)}
	after := MetricsSnapshot{Client: line(src, 2014), Server: line(dst, 2014)}
	spec := scenario.RunSpec{Mode: scenario.BothSidecars, MTLS: true, Protocol: scenario.HTTP, Connections: 4}
	checks := TrafficChecks(spec, 2000, before, after, LabIdentities())
	if len(checks) != 3 {
		t.Fatalf("both sidecars with mTLS: %d checks, want 3: %+v", len(checks), checks)
	}
	for _, c := range checks {
		if !c.OK {
			t.Errorf("check failed: %+v", c)
		}
	}
	// Traffic that bypassed the client sidecar fails its check.
	checks = TrafficChecks(spec, 2000, before, MetricsSnapshot{Client: before.Client, Server: after.Server}, LabIdentities())
	if checks[0].OK || !strings.Contains(checks[0].Detail, "0 requests counted, want >= 2000") {
		t.Errorf("bypassed client sidecar passed: %+v", checks[0])
	}
	if n := len(TrafficChecks(scenario.RunSpec{Mode: scenario.NoMesh}, 2000, before, after, LabIdentities())); n != 0 {
		t.Errorf("no-mesh has %d checks, want none", n)
	}
	// A gRPC run counts only calls the sidecars saw as gRPC: these were
	// counted as plain HTTP, so every check fails.
	spec.Protocol = scenario.GRPC
	for _, c := range TrafficChecks(spec, 2000, before, after, LabIdentities()) {
		if c.OK || !strings.Contains(c.Detail, "0 gRPC requests counted") {
			t.Errorf("gRPC check passed on HTTP counts: %+v", c)
		}
	}
	grpc := func(labels string) string { return labels + `,request_protocol="grpc"` }
	before = MetricsSnapshot{Client: line(grpc(src), 0), Server: line(grpc(dst), 0)}
	after = MetricsSnapshot{Client: line(grpc(src), 2000), Server: line(grpc(dst), 2000)}
	for _, c := range TrafficChecks(spec, 2000, before, after, LabIdentities()) {
		if !c.OK {
			t.Errorf("gRPC check failed on gRPC counts: %+v", c)
		}
	}
}

// The waypoint modes: the waypoint must have counted every call as
// reporter="waypoint", and the server's node proxy must have taken the
// waypoint's connections (at least one: it pools them) in mutual TLS from
// the waypoint's identity, not the client's.
func TestTrafficChecksWaypoint(t *testing.T) {
	req := func(n int) string {
		return "istio_requests_total{reporter=\"waypoint\",response_code=\"200\"} " + strconv.Itoa(n) + "\n"
	}
	conns := func(reporter, peer string, n int) string {
		return `istio_tcp_connections_opened_total{reporter="` + reporter + `",source_principal="` + peer +
			`",connection_security_policy="mutual_tls"} ` + strconv.Itoa(n) + "\n"
	}
	wp, client := SPIFFEID(WaypointSA), SPIFFEID(ClientSA)
	before := MetricsSnapshot{Waypoint: req(5), ClientNode: conns("source", client, 0), ServerNode: conns("destination", wp, 0)}
	after := MetricsSnapshot{Waypoint: req(2005), ClientNode: conns("source", client, 4), ServerNode: conns("destination", wp, 1)}
	spec := scenario.RunSpec{Mode: scenario.AmbientWaypoint, MTLS: true, Protocol: scenario.HTTP, Connections: 4}
	checks := TrafficChecks(spec, 2000, before, after, LabIdentities())
	var names []string
	for _, c := range checks {
		names = append(names, c.Name)
		if !c.OK {
			t.Errorf("check failed: %+v", c)
		}
	}
	want := []string{waypointRole, clientNodeProxy, serverNodeProxy, "mutual_tls from " + wp}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("checks %q, want %q", names, want)
	}
	// Traffic that bypassed the waypoint: the waypoint counted nothing, and
	// the server's node proxy saw the client's identity.
	after = MetricsSnapshot{Waypoint: req(5), ClientNode: after.ClientNode, ServerNode: conns("destination", client, 4)}
	checks = TrafficChecks(spec, 2000, before, after, LabIdentities())
	if checks[0].OK || !strings.Contains(checks[0].Detail, "0 requests counted, want >= 2000") {
		t.Errorf("bypassed waypoint passed: %+v", checks[0])
	}
	if c := checks[3]; c.OK || c.Detail != "0 connections counted since the mode was set up, want >= 1" {
		t.Errorf("the client's identity at the server passed as the waypoint's: %+v", c)
	}
	// A later run of the mode: the waypoint reuses its connections to the
	// server's node proxy, which opens none; those since the set-up count.
	later := MetricsSnapshot{Waypoint: req(4005), ClientNode: conns("source", client, 8), ServerNode: conns("destination", wp, 1)}
	earlier := MetricsSnapshot{Waypoint: req(2005), ClientNode: conns("source", client, 4), ServerNode: conns("destination", wp, 1)}
	for _, c := range TrafficChecks(spec, 2000, earlier, later, LabIdentities()) {
		if !c.OK {
			t.Errorf("a later waypoint run, its connections reused: %+v", c)
		}
	}
	// Ambient L4 still wants the client's identity, on every connection.
	spec.Mode = scenario.Ambient
	l4 := MetricsSnapshot{ClientNode: conns("source", client, 4), ServerNode: conns("destination", client, 4)}
	for _, c := range TrafficChecks(spec, 2000, MetricsSnapshot{}, l4, LabIdentities()) {
		if !c.OK || c.Name == waypointRole {
			t.Errorf("ambient L4: %+v", c)
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

// The proxies' flags: a sidecar captures its pod's traffic (or listens
// explicitly on loopback); the waypoint is meshperf-proxy's waypoint role in
// its own pod, with no capture, named by its Gateway label, identity and
// the scenario's workers, on plain ADS like the sidecars.
func TestSidecarArgs(t *testing.T) {
	n, err := pod.NewLoopbackNetwork("args1")
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	wp, err := n.AddPod(WaypointPod)
	if err != nil {
		t.Fatal(err)
	}
	server, err := n.AddPod(ServerPod)
	if err != nil {
		t.Fatal(err)
	}
	l := &lab{waypointPod: wp, server: server}
	creds := PodCredentials{CAAddress: "https://10.233.0.1:15012", RootCert: "/s/waypoint/root-cert.pem", Token: "/s/waypoint/istio-token"}
	ws := l.waypointSpec()
	ws.creds = creds
	got := strings.Join(sidecarArgs(ws, "10.233.0.1:15010", 2, pod.KindNetns), " ")
	want := "--xds-address 10.233.0.1:15010 --admin-address " + wp.IP().String() + ":15000 --pod-name waypoint --pod-namespace lab" +
		" --service-account waypoint --instance-ip " + wp.IP().String() + " --labels gateway.networking.k8s.io/gateway-name=waypoint" +
		" --concurrency 2 --drain-duration 5s --ca-address https://10.233.0.1:15012 --ca-root-ca /s/waypoint/root-cert.pem" +
		" --auth-token /s/waypoint/istio-token --alt-xds-hostname istiod.istio-system.svc --proxy-type waypoint --capture-mode none"
	if got != want {
		t.Errorf("waypoint args:\n got %s\nwant %s", got, want)
	}
	s := sidecarSpec{role: serverSidecar, pod: server, sa: ServerSA, labels: "app=server", creds: creds}
	got = strings.Join(sidecarArgs(s, "10.233.0.1:15010", 2, pod.KindNetns), " ")
	if !strings.HasSuffix(got, "--auth-token /s/waypoint/istio-token --alt-xds-hostname istiod.istio-system.svc --capture-mode iptables") || strings.Contains(got, "--proxy-type") {
		t.Errorf("server sidecar args in netns: %s", got)
	}
	s.listen = []string{"127.1.0.3:8080=virtualInbound:8080"}
	got = strings.Join(sidecarArgs(s, "127.0.0.1:15010", 2, pod.KindLoopback), " ")
	if !strings.HasSuffix(got, "--capture-mode none --listen 127.1.0.3:8080=virtualInbound:8080") {
		t.Errorf("server sidecar args on loopback: %s", got)
	}
}

// The waypoint is configured for the run when it has connect_terminate,
// its main_internal listener has a chain for the server Service's VIP and
// port and the service's cluster tunnels to the server pod through
// connect_originate.
func TestWaypointConverged(t *testing.T) {
	spec := scenario.RunSpec{Mode: scenario.AmbientWaypoint, MTLS: true, Protocol: scenario.HTTP}
	server := netip.MustParseAddrPort("10.233.0.3:8080")
	const chain = `{"listeners": {"connect_terminate": {}, "main_internal": {"filter_chains": [
	    {"name": "inbound-vip|8080|http|server.lab.svc.cluster.local",
	     "filter_chain_match": {"destination_port": 8080, "destination_prefixes": [{"address": "10.96.0.10", "prefix_len": 32}]}}]}}`
	const endpoint = `"endpoints": {"outbound|8080||server.lab.svc.cluster.local": {"endpoints": [
	    {"address": {"internal": {"listener": "connect_originate", "endpoint_id": "10.233.0.3:8080", "destination": "10.233.0.3:8080"}}, "tls_mode": "disabled"}]}}`
	for _, c := range []struct{ name, dump, lack string }{
		{"configured", chain + ", " + endpoint + "}", ""},
		{"no listener yet", `{}`, "listener connect_terminate: missing"},
		{"main_internal only (the rest NACKed)", strings.Replace(chain, `"connect_terminate": {}, `, "", 1) + ", " + endpoint + "}",
			"listener connect_terminate: missing"},
		{"no main_internal yet", `{"listeners": {"connect_terminate": {}}}`, "listener main_internal: no filter chain for 10.96.0.10:8080"},
		{"another port", strings.Replace(chain, `"destination_port": 8080`, `"destination_port": 8079`, 1) + "}", "no filter chain"},
		{"another VIP", strings.Replace(chain, "10.96.0.10", "10.96.0.11", 1) + "}", "no filter chain"},
		{"no endpoint yet", chain + "}", "cluster outbound|8080||server.lab.svc.cluster.local: want an endpoint through connect_originate to 10.233.0.3:8080, have []"},
		{"a stale endpoint", chain + ", " + strings.ReplaceAll(endpoint, "10.233.0.3", "10.233.0.9") + "}", "have [connect_originate to 10.233.0.9:8080]"},
	} {
		var d configDump
		if err := json.Unmarshal([]byte(c.dump), &d); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		lack := waypointConverged(&d, spec, server)
		if c.lack == "" && lack != "" || c.lack != "" && !strings.Contains(lack, c.lack) {
			t.Errorf("%s: %q, want %q", c.name, lack, c.lack)
		}
	}
}

// MetricSample reads the kubelet's resource metrics, whose samples carry
// timestamps, by whole labels.
func TestMetricSampleReadsTimestamps(t *testing.T) {
	text := `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="istio-proxy",namespace="lab",pod="client-1"} 1.25 1732790000123
container_cpu_usage_seconds_total{container="istio-proxy-x",namespace="lab",pod="client-1"} 9 1732790000456
`
	v, ms, ok := MetricSample(text, "container_cpu_usage_seconds_total", map[string]string{"container": "istio-proxy", "pod": "client-1"})
	if !ok || v != 1.25 || ms != 1732790000123 {
		t.Errorf("sample = %v at %d (%v), want 1.25 at 1732790000123", v, ms, ok)
	}
	if _, _, ok := MetricSample(text, "container_cpu_usage_seconds_total", map[string]string{"container": "app"}); ok {
		t.Error("a sample for a container that has none")
	}
	if _, _, ok := MetricSample("not {prometheus", "x", nil); ok {
		t.Error("a sample from text that is not Prometheus' format")
	}
}
