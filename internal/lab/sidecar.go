package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// adminPort is where each sidecar serves its admin API, on its pod's
// address: the host reaches it over the bridge (capture leaves 15000 alone)
// or, on loopback, at the pod's own 127.x address.
const adminPort = 15000

// sidecarSpec is what differs between the proxies the lab starts in a pod
// from meshperf-proxy's Envoy-style roles: the client's and the server's
// sidecar, and the waypoint.
type sidecarSpec struct {
	role     string // clientSidecar, serverSidecar or waypointRole
	waypoint bool   // --proxy-type waypoint: no capture, HBONE on 15008
	pod      *pod.Pod
	sa       string
	labels   string   // the workload's labels, k=v,k=v
	listen   []string // explicit bindings (loopback network only)
	creds    PodCredentials
}

// The sidecars' roles: their processes' names, their checks' names, their
// keys in a soak's samples.
const (
	clientSidecar = "client sidecar"
	serverSidecar = "server sidecar"
)

// waypointRole is the waypoint's process name and check name.
const waypointRole = "waypoint"

// sidecarDrain is the sidecars' drain period (meshperf-proxy's
// --drain-duration, Istio's terminationDrainDuration default); stopping one
// waits that long, and a little more, before SIGKILL.
const sidecarDrain = 5 * time.Second

// sidecarArgs are meshperf-proxy's flags for a pod's proxy, which gets its
// certificate from the CA with its pod's credentials. A sidecar captures
// its pod's traffic (iptables in netns mode, explicit listeners on
// loopback); a waypoint captures nothing, as Istio's waypoint Deployment:
// it binds HBONE's port, where node proxies send to its address.
func sidecarArgs(s sidecarSpec, xds string, concurrency int, kind pod.Kind) []string {
	args := []string{
		"--xds-address", xds,
		"--admin-address", netip.AddrPortFrom(s.pod.IP(), adminPort).String(),
		"--pod-name", s.pod.Name(),
		"--pod-namespace", Namespace,
		"--service-account", s.sa,
		"--instance-ip", s.pod.IP().String(),
		"--labels", s.labels,
		"--concurrency", strconv.Itoa(concurrency),
		"--drain-duration", sidecarDrain.String(),
	}
	args = append(args, s.creds.sidecarArgs()...)
	switch {
	case s.waypoint:
		return append(args, "--proxy-type", "waypoint", "--capture-mode", "none")
	case kind == pod.KindNetns:
		return append(args, "--capture-mode", "iptables")
	}
	args = append(args, "--capture-mode", "none")
	for _, l := range s.listen {
		args = append(args, "--listen", l)
	}
	return args
}

// admin talks to one proxy's HTTP endpoints: a sidecar's admin API, a node
// proxy's readiness, stats and admin ports. It names the proxy by IP
// address, which the admin's Host rule (no names but its own, against DNS
// rebinding) always accepts.
type admin struct {
	base   string
	client *http.Client
}

func newAdmin(ip netip.Addr) *admin {
	return newAdminAt(netip.AddrPortFrom(ip, adminPort), nil)
}

// newAdminAt talks HTTP to addr, through transport when not nil (to dial
// from inside a namespace).
func newAdminAt(addr netip.AddrPort, transport http.RoundTripper) *admin {
	return &admin{base: "http://" + addr.String(), client: &http.Client{Timeout: 5 * time.Second, Transport: transport}}
}

func (a *admin) get(ctx context.Context, path string) (int, []byte, error) {
	return a.do(ctx, http.MethodGet, path)
}

func (a *admin) do(ctx context.Context, method, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	if method != http.MethodGet && method != http.MethodHead {
		// meshperf-proxy's admin refuses a write without it: a web page's
		// form or no-cors fetch cannot send this content type.
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// ready reports whether the sidecar answers /ready with 200.
func (a *admin) ready(ctx context.Context) bool {
	code, _, err := a.get(ctx, "/ready")
	return err == nil && code == http.StatusOK
}

// setAccessLog turns the sidecar's access log on or off.
func (a *admin) setAccessLog(ctx context.Context, on bool) error {
	code, body, err := a.do(ctx, http.MethodPost, "/access_log?enabled="+strconv.FormatBool(on))
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d: %s", code, strings.TrimSpace(string(body)))
	}
	if err != nil {
		return fmt.Errorf("access log: %w", err)
	}
	return nil
}

// metrics scrapes /stats/prometheus.
func (a *admin) metrics(ctx context.Context) (string, error) {
	code, body, err := a.get(ctx, "/stats/prometheus")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return "", fmt.Errorf("read metrics from %s: %w", a.base, err)
	}
	return string(body), nil
}

// configDump is the part of the proxy's /config_dump the lab reads.
type configDump struct {
	Clusters  map[string]dumpCluster `json:"clusters"`
	Endpoints map[string]struct {
		Endpoints []dumpEndpoint `json:"endpoints"`
	} `json:"endpoints"`
	Listeners map[string]struct {
		FilterChains []struct {
			Match struct {
				DestinationPort     *int `json:"destination_port"`
				DestinationPrefixes []struct {
					Address   string `json:"address"`
					PrefixLen int    `json:"prefix_len"`
				} `json:"destination_prefixes"`
				TransportProtocol *string `json:"transport_protocol"`
			} `json:"filter_chain_match"`
		} `json:"filter_chains"`
	} `json:"listeners"`
}

type dumpCluster struct {
	Transport json.RawMessage `json:"transport"`
}

type dumpEndpoint struct {
	Address struct {
		Socket string `json:"socket"`
		// Internal is a waypoint's endpoint: an internal listener and
		// where the connection goes through it.
		Internal *struct {
			Listener    string `json:"listener"`
			Destination string `json:"destination"`
		} `json:"internal"`
	} `json:"address"`
	TLSMode string `json:"tls_mode"`
}

func (a *admin) configDump(ctx context.Context) (*configDump, error) {
	code, body, err := a.get(ctx, "/config_dump")
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("status %d", code)
	}
	if err != nil {
		return nil, fmt.Errorf("config_dump: %w", err)
	}
	var d configDump
	if err := json.Unmarshal(body, &d); err != nil {
		return nil, fmt.Errorf("config_dump: %w", err)
	}
	return &d, nil
}

// clientConverged says what the client sidecar still lacks to send this
// run's traffic as it should ("" when nothing): exactly one endpoint for the
// server, at the server pod's address, with tlsMode istio exactly when the
// server pod has a sidecar (auto mTLS keys on it), and a plain-text cluster
// when a DestinationRule turns TLS off.
func clientConverged(d *configDump, r scenario.RunSpec, want netip.AddrPort) string {
	cluster := fmt.Sprintf("outbound|%d||%s", servicePort(r.Protocol), ServerHost())
	_, serverSidecar := r.Mode.Sidecars()
	wantTLS := ""
	if serverSidecar {
		wantTLS = "istio"
	}
	eps := d.Endpoints[cluster].Endpoints
	var seen []string
	for _, e := range eps {
		seen = append(seen, e.Address.Socket+" tlsMode="+orNone(e.TLSMode))
	}
	if len(eps) != 1 || eps[0].Address.Socket != want.String() || tlsModeOf(eps[0].TLSMode) != wantTLS {
		return fmt.Sprintf("cluster %s: want one endpoint %s tlsMode=%s, have [%s]",
			cluster, want, orNone(wantTLS), strings.Join(seen, ", "))
	}
	if PeerAuthMode(r) == "DISABLE" {
		c, ok := d.Clusters[cluster]
		if !ok || strings.Trim(string(c.Transport), `"`) != "plain" {
			return fmt.Sprintf("cluster %s: want plain-text transport (DestinationRule tls DISABLE), have %s", cluster, c.Transport)
		}
	}
	return ""
}

// serverConverged says what the server sidecar's inbound listener still
// lacks for the namespace's PeerAuthentication ("" when nothing): STRICT
// accepts only TLS on the app port, DISABLE only plain text, PERMISSIVE
// both.
func serverConverged(d *configDump, r scenario.RunSpec, appPort int) string {
	var tls, plain bool
	for _, fc := range d.Listeners["virtualInbound"].FilterChains {
		if fc.Match.DestinationPort == nil || *fc.Match.DestinationPort != appPort {
			continue
		}
		if fc.Match.TransportProtocol != nil && *fc.Match.TransportProtocol == "tls" {
			tls = true
		} else {
			plain = true
		}
	}
	mode := PeerAuthMode(r)
	want := map[string][2]bool{"STRICT": {true, false}, "DISABLE": {false, true}, "PERMISSIVE": {true, true}}[mode]
	if tls != want[0] || plain != want[1] {
		return fmt.Sprintf("virtualInbound port %d: want %s (tls %v, plain text %v), have tls %v, plain text %v",
			appPort, mode, want[0], want[1], tls, plain)
	}
	return ""
}

// waypointConverged says what the waypoint still lacks to carry this run's
// traffic ("" when nothing): connect_terminate, which serves HBONE on the
// port the node proxies send to (bound before any config, so a missing
// listener shows only as connections closed in the TLS handshake), a
// main_internal chain for the server Service's VIP and port, and an
// endpoint of the service's cluster that tunnels to the server pod (want)
// through connect_originate.
func waypointConverged(d *configDump, r scenario.RunSpec, want netip.AddrPort) string {
	if _, ok := d.Listeners["connect_terminate"]; !ok {
		return "listener connect_terminate: missing"
	}
	port := servicePort(r.Protocol)
	chain := false
	for _, fc := range d.Listeners["main_internal"].FilterChains {
		if fc.Match.DestinationPort == nil || *fc.Match.DestinationPort != port {
			continue
		}
		for _, p := range fc.Match.DestinationPrefixes {
			chain = chain || (p.Address == ServerVIP.String() && p.PrefixLen == 32)
		}
	}
	if !chain {
		return fmt.Sprintf("listener main_internal: no filter chain for %s", netip.AddrPortFrom(ServerVIP, uint16(port)))
	}
	cluster := fmt.Sprintf("outbound|%d||%s", port, ServerHost())
	var seen []string
	for _, e := range d.Endpoints[cluster].Endpoints {
		if in := e.Address.Internal; in != nil {
			if in.Listener == "connect_originate" && in.Destination == want.String() {
				return ""
			}
			seen = append(seen, in.Listener+" to "+in.Destination)
		} else {
			seen = append(seen, e.Address.Socket)
		}
	}
	return fmt.Sprintf("cluster %s: want an endpoint through connect_originate to %s, have [%s]", cluster, want, strings.Join(seen, ", "))
}

func tlsModeOf(s string) string {
	if s == "disabled" || s == "none" {
		return ""
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// SumMetric adds up the samples of a Prometheus text metric whose labels
// include every pair in want; 0 when there are none, or when text is not
// Prometheus' text format.
func SumMetric(text, name string, want map[string]string) float64 {
	s, err := metrics.Parse(strings.NewReader(text))
	if err != nil {
		return 0
	}
	return s.SumWhere(name, want)
}

// MetricSample is the first sample of a Prometheus text metric whose
// labels include every pair in want: its value, and its timestamp (ms
// since the epoch) when the line has one (the kubelet's do), else 0.
func MetricSample(text, name string, want map[string]string) (value float64, timestampMS int64, ok bool) {
	s, err := metrics.Parse(strings.NewReader(text))
	if err != nil {
		return 0, 0, false
	}
	return s.FirstWhere(name, want)
}

// LoopbackSidecarArgs are meshperf-proxy's flags for a sidecar of pod p on
// the loopback network, as the lab starts them: identity sa, proven by
// creds (IssuePodCredentials), workload labels (k=v,k=v), explicit listen
// bindings (ADDR=LISTENER[:PORT]) instead of capture. meshperf bench proxy
// starts its sidecars with them, so that it measures the proxy as the lab
// runs it.
func LoopbackSidecarArgs(p *pod.Pod, sa, labels string, listen []string, xds string, concurrency int, creds PodCredentials) []string {
	return sidecarArgs(sidecarSpec{pod: p, sa: sa, labels: labels, listen: listen, creds: creds}, xds, concurrency, pod.KindLoopback)
}

// SidecarDrain is how long a stopped sidecar drains before it exits: a
// caller stopping one gives it this much, and a little more, before SIGKILL.
const SidecarDrain = sidecarDrain
