package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
)

// The subjects of the proxy benchmark: the path without a proxy, and each
// proxy in it.
const (
	SubjectNoProxy  = "no proxy"
	SubjectMeshperf = "meshperf-proxy"
	SubjectHAProxy  = "haproxy"
)

// The benchmark's cases.
const (
	CasePlaintext = "plaintext"
	CaseMTLS      = "mtls"
)

// HAProxyPeer is Debian's HAProxy, the proxy bench proxy measures
// meshperf-proxy beside.
var HAProxyPeer = Peer{Name: "haproxy", Flag: "-haproxy", Install: "apt-get install haproxy"}

// subjectProc is one process of a subject on the request path.
type subjectProc struct {
	role  string // results.RoleServerSidecar or RoleClientSidecar
	p     *proc.Process
	admin string // meshperf-proxy's admin base URL, where it counts its allocations; "" for HAProxy
}

// subject is one subject set up for a case and protocol: where the load
// sends, and its proxies.
type subject struct {
	name      string
	mode      string // the results' mode
	target    netip.AddrPort
	procs     []subjectProc
	dataPlane results.Component
	pilot     bool // configured by meshperf pilot
}

func (s *subject) stop() error {
	var errs []error
	// The client side first, so that its connections close from the
	// caller's end.
	for i := len(s.procs) - 1; i >= 0; i-- {
		errs = append(errs, s.procs[i].p.Stop())
	}
	return errors.Join(errs...)
}

// modeName is the results' mode of a subject in a case and protocol: the
// proxy's name, -mtls for two proxies doing mutual TLS, -h2 for HTTP/2
// (HTTP/1.1 is Istio's figure and goes without), so that `meshperf
// history -scenario bench-proxy -mode meshperf-proxy` follows one
// measurement; no-mesh for the path without a proxy, which the summary
// takes added latency against.
func modeName(subjectName, caseName string, p scenario.Protocol) string {
	if subjectName == SubjectNoProxy {
		return results.ModeNoMesh
	}
	m := subjectName
	if caseName == CaseMTLS {
		m += "-mtls"
	}
	if p == scenario.H2 {
		m += "-h2"
	}
	return m
}

// meshPods are the loopback pods the benchmark's proxies listen in: the
// sidecars' client and server pods as the lab names them (their addresses
// are their identities' workloads in pilot), and HAProxy's pair of its own,
// so that every subject can stay up while the others run.
type meshPods struct {
	client, server, hClient, hServer, pilot *pod.Pod
}

// startMeshperf sets meshperf-proxy up for a case as the lab's loopback
// network does: for one hop the server sidecar alone (the lab's
// server-sidecar mode), for mTLS both sidecars with STRICT
// PeerAuthentication (both-sidecars), configured by pilot.
func (b *proxyBench) startMeshperf(ctx context.Context, caseName string, p scenario.Protocol) (*subject, error) {
	spec := scenario.RunSpec{Mode: scenario.ServerSidecar, Protocol: p}
	if caseName == CaseMTLS {
		spec.Mode, spec.MTLS = scenario.BothSidecars, true
	}
	mesh := lab.MeshYAML(spec, lab.PodAddrs{Client: b.pods.client.IP(), Server: b.pods.server.IP()}, b.app)
	if _, err := b.api.Apply(ctx, "bench-proxy-"+caseName+".yaml", []byte(mesh.Base)); err != nil {
		return nil, fmt.Errorf("apply the mesh configuration: %w", err)
	}
	s := &subject{name: SubjectMeshperf, mode: modeName(SubjectMeshperf, caseName, p), dataPlane: b.proxyVersion, pilot: true}
	inbound := fmt.Sprintf("%s=virtualInbound:%d", netip.AddrPortFrom(b.pods.server.IP(), uint16(b.app.HTTP)), b.app.HTTP)
	if err := b.startSidecar(ctx, s, results.RoleServerSidecar, b.pods.server, lab.ServerSA, "app=server", inbound); err != nil {
		return nil, err
	}
	s.target = netip.AddrPortFrom(b.pods.server.IP(), uint16(b.app.HTTP))
	if caseName == CaseMTLS {
		outbound := fmt.Sprintf("%s=virtualOutbound:%d", netip.AddrPortFrom(b.pods.client.IP(), lab.ServiceHTTPPort), lab.ServiceHTTPPort)
		if err := b.startSidecar(ctx, s, results.RoleClientSidecar, b.pods.client, lab.ClientSA, "app=client", outbound); err != nil {
			_ = s.stop()
			return nil, err
		}
		s.target = netip.AddrPortFrom(b.pods.client.IP(), lab.ServiceHTTPPort)
	}
	if err := b.awaitPath(ctx, s, p); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

// startSidecar starts a sidecar of pod in, with its pod's token and so its
// certificate from pilot's CA, as the lab starts them.
func (b *proxyBench) startSidecar(ctx context.Context, s *subject, role string, in *pod.Pod, sa, labels, listen string) error {
	creds, err := lab.IssuePodCredentials(ctx, b.pilot, b.api, filepath.Join(b.pilot.DataDir(), "pods", in.Name()),
		lab.PodIdentity{Namespace: lab.Namespace, Pod: in.Name(), ServiceAccount: sa}, nil)
	if err != nil {
		return fmt.Errorf("meshperf-proxy %s: %w", role, err)
	}
	args := lab.LoopbackSidecarArgs(in, sa, labels, []string{listen}, b.pilot.Addrs.GRPC, b.cfg.Threads, creds)
	c, err := in.Start(proc.Spec{Name: "meshperf-proxy " + role, Path: b.cfg.ProxyBin, Args: args,
		StopGrace: lab.SidecarDrain + 2*time.Second, LogPath: filepath.Join(b.cfg.OutDir, "meshperf-proxy-"+role+".log")})
	if err != nil {
		return fmt.Errorf("meshperf-proxy %s: %w", role, err)
	}
	s.procs = append(s.procs, subjectProc{role: role, p: c, admin: "http://" + netip.AddrPortFrom(in.IP(), 15000).String()})
	return nil
}

// startHAProxy sets HAProxy up for a case the way meshperf-proxy is: one
// hop in front of the echo server, or two HAProxys doing mutual TLS with
// certificates from the CA pilot uses (its root, SPIFFE URI SANs, the same
// key algorithm), each verifying the other's chain (verify required) and
// speaking the load's protocol inside, as meshperf's sidecars do.
func (b *proxyBench) startHAProxy(ctx context.Context, caseName string, p scenario.Protocol) (*subject, error) {
	s := &subject{name: SubjectHAProxy, mode: modeName(SubjectHAProxy, caseName, p), dataPlane: b.haproxyVersion}
	app := netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(b.app.HTTP))
	server := netip.AddrPortFrom(b.pods.hServer.IP(), uint16(b.app.HTTP))
	h2 := p == scenario.H2
	serverCfg := haproxyConfig{threads: b.cfg.Threads, bind: server, h2: h2, upstream: app, upstreamH2: h2}
	s.target = server
	if caseName == CaseMTLS {
		serverCfg.tls = &haproxyTLS{cert: b.certs.server, root: b.certs.root}
	}
	if err := b.startHAProxyProcess(s, results.RoleServerSidecar, serverCfg); err != nil {
		return nil, err
	}
	if caseName == CaseMTLS {
		client := netip.AddrPortFrom(b.pods.hClient.IP(), lab.ServiceHTTPPort)
		clientCfg := haproxyConfig{threads: b.cfg.Threads, bind: client, h2: h2, upstream: server, upstreamH2: h2,
			upstreamTLS: &haproxyTLS{cert: b.certs.client, root: b.certs.root}}
		if err := b.startHAProxyProcess(s, results.RoleClientSidecar, clientCfg); err != nil {
			_ = s.stop()
			return nil, err
		}
		s.target = client
	}
	if err := b.awaitPath(ctx, s, p); err != nil {
		_ = s.stop()
		return nil, err
	}
	return s, nil
}

func (b *proxyBench) startHAProxyProcess(s *subject, role string, c haproxyConfig) error {
	path := filepath.Join(b.cfg.OutDir, "haproxy-"+role+".cfg")
	if err := os.WriteFile(path, []byte(c.render()), 0o644); err != nil {
		return fmt.Errorf("haproxy %s: %w", role, err)
	}
	// -db keeps it in the foreground, as a supervised child; -W not: the
	// worker itself is the process measured.
	p, err := proc.Start(proc.Spec{Name: "haproxy " + role, Path: b.cfg.HAProxyBin, Args: []string{"-db", "-f", path},
		LogPath: filepath.Join(b.cfg.OutDir, "haproxy-"+role+".log")})
	if err != nil {
		return fmt.Errorf("haproxy %s: %w", role, err)
	}
	s.procs = append(s.procs, subjectProc{role: role, p: p})
	return nil
}

// haproxyTLS is a certificate (chain and key in one PEM file, as HAProxy
// reads it) and the root to verify the peer with.
type haproxyTLS struct{ cert, root string }

// haproxyConfig is one HAProxy: a frontend at bind forwarding everything
// to upstream.
type haproxyConfig struct {
	threads     int
	bind        netip.AddrPort
	h2          bool        // h2c from the load (or, behind TLS, h2 by ALPN)
	tls         *haproxyTLS // terminate mutual TLS on bind
	upstream    netip.AddrPort
	upstreamH2  bool
	upstreamTLS *haproxyTLS // originate mutual TLS to upstream
}

// render writes the configuration: nbthread as meshperf-proxy's
// --concurrency, keep-alive both ways (HAProxy's default, as a sidecar's
// connection pool), no logging (meshperf-proxy's access log is off too),
// and timeouts that never fire within a run.
func (c haproxyConfig) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "global\n  nbthread %d\n  maxconn 4096\n\n", c.threads)
	b.WriteString("defaults\n  mode http\n  timeout connect 5s\n  timeout client 60s\n  timeout server 60s\n  option http-keep-alive\n\n")
	b.WriteString("frontend in\n  bind " + c.bind.String())
	switch {
	case c.tls != nil:
		// ALPN offers both, as meshperf-proxy's server side does; the
		// client picks the load's protocol.
		fmt.Fprintf(&b, " ssl crt %s ca-file %s verify required alpn h2,http/1.1", c.tls.cert, c.tls.root)
	case c.h2:
		b.WriteString(" proto h2")
	}
	b.WriteString("\n  default_backend out\n\nbackend out\n  server upstream " + c.upstream.String())
	switch {
	case c.upstreamTLS != nil:
		alpn := "http/1.1"
		if c.upstreamH2 {
			alpn = "h2"
		}
		fmt.Fprintf(&b, " ssl crt %s ca-file %s verify required alpn %s", c.upstreamTLS.cert, c.upstreamTLS.root, alpn)
	case c.upstreamH2:
		b.WriteString(" proto h2")
	}
	b.WriteString("\n")
	return b.String()
}

// haproxyCerts are the PEM files HAProxy's mutual TLS uses.
type haproxyCerts struct{ root, client, server string }

// issueHAProxyCerts opens the CA in pilot's data directory (creating its
// root, which pilot then loads) and issues HAProxy the client's and the
// server's identities as pilot issues them to meshperf's sidecars.
func issueHAProxyCerts(pilotDataDir, outDir string) (haproxyCerts, error) {
	authority, err := ca.Open(filepath.Join(pilotDataDir, "ca"), "cluster.local")
	if err != nil {
		return haproxyCerts{}, err
	}
	certs := haproxyCerts{root: filepath.Join(outDir, "haproxy-root.pem")}
	if err := os.WriteFile(certs.root, authority.RootPEM(), 0o644); err != nil {
		return certs, fmt.Errorf("haproxy certificates: %w", err)
	}
	for _, id := range []struct {
		sa  string
		dst *string
	}{{lab.ClientSA, &certs.client}, {lab.ServerSA, &certs.server}} {
		w, err := authority.Issue(lab.Namespace, id.sa)
		if err != nil {
			return certs, err
		}
		*id.dst = filepath.Join(outDir, "haproxy-"+id.sa+".pem")
		if err := os.WriteFile(*id.dst, append(append([]byte(nil), w.CertChainPEM...), w.KeyPEM...), 0o600); err != nil {
			return certs, fmt.Errorf("haproxy certificates: %w", err)
		}
	}
	return certs, nil
}

func commandOutput(ctx context.Context, path string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	return string(out), err
}

// haproxyVersion reads `haproxy -v`: "HAProxy version 2.6.12-1+deb12u4 ...".
func haproxyVersion(ctx context.Context, path string) (results.Component, error) {
	out, err := commandOutput(ctx, path, "-v")
	if err != nil {
		return results.Component{}, fmt.Errorf("%s -v: %w", path, err)
	}
	fields := strings.Fields(out)
	if len(fields) < 3 || fields[0] != "HAProxy" || fields[1] != "version" {
		return results.Component{}, fmt.Errorf("%s -v: not HAProxy's answer: %.60q", path, out)
	}
	return results.Component{Name: "haproxy", Version: fields[2]}, nil
}

// awaitPath waits until a request through the subject's whole path comes
// back 200: every proxy listening and configured, and for mTLS the
// handshake done with the certificates (STRICT refuses plain text, so an
// answer means the hop is mutual TLS).
func (b *proxyBench) awaitPath(ctx context.Context, s *subject, p scenario.Protocol) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// h2c with prior knowledge for HTTP/2, as the load speaks it: an h2
	// frontend takes nothing else.
	var protocols http.Protocols
	if p == scenario.H2 {
		protocols.SetUnencryptedHTTP2(true)
	} else {
		protocols.SetHTTP1(true)
	}
	transport := &http.Transport{Protocols: &protocols}
	defer transport.CloseIdleConnections()
	client := &http.Client{Timeout: 2 * time.Second, Transport: transport}
	url := "http://" + s.target.String() + "/echo?size=1"
	last := "no answer"
	for {
		for _, p := range s.procs {
			if p.p.Exited() {
				return fmt.Errorf("%s: %s (log: %s)", p.p.Name(), p.p.ExitReason(), p.p.LogPath())
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Host = lab.ServerHost()
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = "status " + strconv.Itoa(resp.StatusCode)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: the path through it did not answer within 30s: %s", s.name, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
