package lab

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/internal/lab/inpod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/topology"
)

// startParallel bounds how many of a graph's processes start (and get
// their capture) at once.
const startParallel = 16

// ensureGraph makes the graph ready for spec, as ensure does for two pods:
// the same mode with everything alive costs nothing; otherwise the old
// mode's proxies go, dead apps are restarted, and the mode is set up, its
// set-up timed.
func (l *lab) ensureGraph(ctx context.Context, spec scenario.RunSpec) error {
	g := l.graph
	if l.modeReady && l.mode == spec.Mode && l.modeAccessLog == spec.AccessLog && l.graphAlive(spec.Mode) {
		return nil
	}
	start := time.Now()
	l.modeReady = false
	if err := l.teardownGraphMode(); err != nil {
		return err
	}
	if err := l.ensurePilot(ctx); err != nil {
		return err
	}
	if l.mode != spec.Mode {
		// A new mode starts new apps, as a pod is re-created to join or
		// leave the mesh: an app's kept-alive connections from the old
		// mode would go on around the new mode's proxies.
		if err := l.stopGraphApps(); err != nil {
			return err
		}
	}
	if err := l.startGraphApps(ctx, spec.Mode); err != nil {
		return err
	}
	if err := l.setupGraphMode(ctx, spec); err != nil {
		return err
	}
	if err := l.waitAppsAnswer(ctx); err != nil {
		return err
	}
	g.setup = time.Since(start)
	l.logf("  %s: %d pods set up in %s", spec.Mode, len(g.pods)+1, g.setup.Round(time.Millisecond))
	if err := l.primeGraph(ctx, spec); err != nil {
		return err
	}
	l.mode, l.modeAccessLog, l.modeReady = spec.Mode, spec.AccessLog, true
	return nil
}

// primeGraph sends the run's load for its warm-up time once a mode is set
// up, before anything is measured, so that every proxy has opened its
// connections to the replicas it calls. A cluster in steady state has
// them; without this the mode's first run pays for all of them at once:
// in a 104-pod graph, 105 sidecars opening mutual-TLS connections to up to
// 24 replicas each held a tenth of the first run's requests for half a
// second or more (P90 1.27 s), where the next repetition, with the
// connections in place, had a P90 of 63 ms. The two-pod lab needs no such
// pass: its one connection per load connection is opened by the load.
func (l *lab) primeGraph(ctx context.Context, spec scenario.RunSpec) error {
	if spec.Warmup <= 0 {
		return nil
	}
	prime := spec
	prime.Duration, prime.Warmup = spec.Warmup, spec.Warmup/2
	r := l.base(prime)
	r.Label += "_prime"
	path := filepath.Join(l.logDir, JSONName(prime, r.Label))
	args, env, err := l.graphLoadCommand(prime, r, path)
	if err != nil {
		return err
	}
	start := time.Now()
	if _, _, _, reason := l.runLoad(ctx, prime, r, l.graphWatched(), results.RoleLoadGenerator, args, env, path); reason != "" {
		return fmt.Errorf("lab: priming the graph's connections: %s", reason)
	}
	l.logf("  %s: connections primed with %s of the run's load (not measured)", spec.Mode, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// graphAlive reports whether every process mode m needs is running.
func (l *lab) graphAlive(m scenario.Mode) bool {
	g := l.graph
	client, _ := m.Sidecars()
	for _, n := range l.nodes {
		if alive(n.proxy) != m.NodeProxies() {
			return false
		}
	}
	for _, gp := range g.pods {
		if !alive(gp.app) || alive(gp.sidecar) != client {
			return false
		}
	}
	return alive(l.pilot.Process) && alive(g.clientSC) == client
}

// startGraphApps starts every app that is not running, several at once,
// and waits until each is ready.
func (l *lab) startGraphApps(ctx context.Context, mode scenario.Mode) error {
	var g errgroup.Group
	g.SetLimit(startParallel)
	for _, gp := range l.graph.pods {
		if alive(gp.app) {
			continue
		}
		if gp.app != nil && l.mode == mode {
			l.logf("  restarting %s: %s", gp.app.Name(), gp.app.ExitReason())
		}
		g.Go(func() error { return l.startApp(ctx, gp) })
	}
	return g.Wait()
}

// stopGraphApps stops every app, all at once.
func (l *lab) stopGraphApps() error {
	var eg errgroup.Group
	for _, gp := range l.graph.pods {
		if alive(gp.app) {
			eg.Go(gp.app.Stop)
		}
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("lab: stop apps: %w", err)
	}
	return nil
}

// teardownGraphMode stops every sidecar and removes every pod's rules,
// takes the pods out of ambient and stops the node proxies, all pods at
// once (a sidecar's stop waits out its drain).
func (l *lab) teardownGraphMode() error {
	g := l.graph
	var eg errgroup.Group
	stop := func(p **proc.Process) {
		if *p == nil {
			return
		}
		c := *p
		*p = nil
		eg.Go(c.Stop)
	}
	stop(&g.clientSC)
	for _, gp := range g.pods {
		stop(&gp.sidecar)
	}
	errs := []error{eg.Wait()}
	for _, n := range l.nodes {
		errs = append(errs, n.leave())
	}
	// Whatever the mode installed (sidecar capture or kube-proxy's rules)
	// goes; ambient's went with leave.
	var ug errgroup.Group
	ug.SetLimit(startParallel)
	ug.Go(g.client.Uncapture)
	for _, gp := range g.pods {
		ug.Go(gp.pod.Uncapture)
	}
	errs = append(errs, ug.Wait())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lab: stop proxies: %w", err)
	}
	return nil
}

// setupGraphMode applies the mode's configuration and stands its data
// plane up: kube-proxy's rules in every pod (no-mesh), a sidecar in every
// pod (both-sidecars), or every pod enrolled in its node's proxy (ambient);
// then waits until every proxy carries what the graph needs.
func (l *lab) setupGraphMode(ctx context.Context, spec scenario.RunSpec) error {
	g := l.graph
	client, _ := spec.Mode.Sidecars()
	if client && g.appliedWE {
		// A WorkloadEntry beside a registered sidecar would give the
		// service two endpoints at one address.
		if err := l.apply(ctx, "graph-workloadentries-delete", l.graphWorkloadEntriesYAML(false), true); err != nil {
			return err
		}
		g.appliedWE = false
	}
	base, drs := g.baseYAML(spec)
	if err := l.apply(ctx, "graph-"+string(spec.Mode), base, false); err != nil {
		return err
	}
	if g.appliedDR && !drs {
		if err := l.apply(ctx, "graph-destinationrules-delete", g.destinationRulesYAML(), true); err != nil {
			return err
		}
	}
	g.appliedDR = drs
	if !client {
		// Applied again on every mode change: ambient adds the node label.
		if err := l.apply(ctx, "graph-workloadentries", l.graphWorkloadEntriesYAML(spec.Mode.NodeProxies()), false); err != nil {
			return err
		}
		g.appliedWE = true
	}
	switch {
	case spec.Mode.NodeProxies():
		for _, n := range l.nodes {
			if err := n.enroll(); err != nil {
				return err
			}
			if err := l.startNodeProxy(ctx, n, spec); err != nil {
				return err
			}
		}
		return l.awaitNodeProxies(ctx, func(_ *node, dump []byte) string { return g.nodeProxyLacks(dump) })
	case client:
		return l.startGraphSidecars(ctx, spec)
	}
	var eg errgroup.Group
	eg.SetLimit(startParallel)
	routes := g.serviceRoutes()
	eg.Go(func() error { return g.client.RouteServices(routes) })
	for _, gp := range g.pods {
		eg.Go(func() error { return gp.pod.RouteServices(routes) })
	}
	if err := eg.Wait(); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

// startGraphSidecars starts a sidecar in every pod, the client's included,
// and waits until each has the endpoints of every service its app calls
// and its inbound listener as the PeerAuthentication wants.
func (l *lab) startGraphSidecars(ctx context.Context, spec scenario.RunSpec) error {
	g := l.graph
	var eg errgroup.Group
	eg.SetLimit(startParallel)
	eg.Go(func() error {
		return l.startSidecar(ctx, sidecarSpec{role: graphSidecarName(ClientPod), pod: g.client, sa: ClientSA, labels: "app=client"}, spec, &g.clientSC)
	})
	for _, gp := range g.pods {
		eg.Go(func() error {
			return l.startSidecar(ctx, sidecarSpec{role: graphSidecarName(gp.pod.Name()), pod: gp.pod, sa: gp.svc.Name,
				labels: "app=" + gp.svc.Name}, spec, &gp.sidecar)
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	sides := []convergeSide{{g.clientSC, newAdmin(g.client.IP()), func(d *configDump) string {
		return g.outboundLacks(d, []*graphService{g.entry})
	}}}
	for _, gp := range g.pods {
		callees := g.callees(gp.svc)
		sides = append(sides, convergeSide{gp.sidecar, newAdmin(gp.pod.IP()), func(d *configDump) string {
			if lack := serverConverged(d, spec, topology.ServicePort); lack != "" {
				return lack
			}
			return g.outboundLacks(d, callees)
		}})
	}
	return awaitConverged(ctx, sides, spec.AccessLog)
}

// graphSidecarName is the process name of a graph pod's sidecar.
func graphSidecarName(podName string) string { return "sidecar " + podName }

// callees are the services s calls.
func (g *graphLab) callees(s *graphService) []*graphService {
	var out []*graphService
	seen := map[string]bool{}
	var visit func(steps topology.Script)
	visit = func(steps topology.Script) {
		for _, st := range steps {
			if st.Call != nil && !seen[st.Call.Service] {
				seen[st.Call.Service] = true
				out = append(out, g.service(st.Call.Service))
			}
			visit(st.Concurrent)
		}
	}
	visit(s.Script)
	return out
}

// outboundLacks says what a sidecar's /config_dump still lacks to call
// services ("" when nothing): each one's cluster with every pod of the
// service as an endpoint, each marked for Istio's mTLS (every pod has a
// sidecar).
func (g *graphLab) outboundLacks(d *configDump, services []*graphService) string {
	for _, s := range services {
		cluster := fmt.Sprintf("outbound|%d||%s", topology.ServicePort, s.host())
		var want, have []string
		for _, gp := range s.pods {
			want = append(want, netip.AddrPortFrom(gp.pod.IP(), topology.ServicePort).String()+" tlsMode=istio")
		}
		for _, e := range d.Endpoints[cluster].Endpoints {
			have = append(have, e.Address.Socket+" tlsMode="+orNone(tlsModeOf(e.TLSMode)))
		}
		sort.Strings(want)
		sort.Strings(have)
		if strings.Join(want, ",") != strings.Join(have, ",") {
			return fmt.Sprintf("cluster %s: want endpoints [%s], have [%s]", cluster, strings.Join(want, ", "), strings.Join(have, ", "))
		}
	}
	return ""
}

// nodeProxyLacks says what a node proxy's /config_dump still lacks for the
// graph ("" when nothing): every pod's workload (the pods call across
// nodes) and every Service's cluster IP. Read as text, as
// clientNodeProxyLacks does, so that ztunnel's dump would do too.
func (g *graphLab) nodeProxyLacks(dump []byte) string {
	text := string(dump)
	for _, gp := range g.pods {
		if uid := inpod.PodUID(Namespace, gp.pod.Name()); !strings.Contains(text, uid) {
			return "its /config_dump does not know the workload " + uid
		}
	}
	for _, s := range g.services {
		if !strings.Contains(text, `"`+s.vip.String()) {
			return "its /config_dump does not know the service " + s.host() + " at " + s.vip.String()
		}
	}
	return ""
}

// waitAppsAnswer waits until every app answers its /metrics, from inside
// its pod, where the lab reads them.
func (l *lab) waitAppsAnswer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	var eg errgroup.Group
	eg.SetLimit(convergeParallel)
	for _, gp := range l.graph.pods {
		eg.Go(func() error {
			a := appAdmin(gp)
			for {
				code, _, err := a.get(ctx, "/metrics")
				if err == nil && code == http.StatusOK {
					return nil
				}
				if gp.app.Exited() {
					return errors.New(gp.app.ExitReason())
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("lab: %s does not answer /metrics within %s: status %d (%v) (log: %s)",
						gp.pod.Name(), convergeTimeout, code, err, gp.app.LogPath())
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	return eg.Wait()
}
