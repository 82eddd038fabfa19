package lab

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// The jobs of the lab's Prometheus: the control plane, and every proxy
// (sidecars, node proxies, the waypoint), each target labelled with its
// results role so that a query picks one process.
const (
	promJobPilot   = "pilot"
	promJobProxies = "meshperf-proxy"
	promRoleLabel  = "role"
	// promRoleControlPlane is the control plane's role label.
	promRoleControlPlane = "control-plane"
)

// preflightPrometheus says, before anything starts, that --prometheus
// cannot run here.
func preflightPrometheus(cfg Config) error {
	if !cfg.Prometheus {
		return nil
	}
	if _, err := syscmd.Find("prometheus", "prometheus"); err != nil {
		return fmt.Errorf("--prometheus needs Debian's prometheus server: %w", err)
	}
	return nil
}

// promTargets are everything the run's Prometheus scrapes, at the
// addresses the host reaches them on (the pods' and nodes' veth addresses,
// or their 127.x addresses on loopback): the control plane's monitoring
// port, each pod's sidecar admin port (down while a mode has no sidecar
// there), the waypoint's, and each node proxy's stats port. A proxy is
// restarted with each mode on the same address, so one static list serves
// the whole matrix.
func (l *lab) promTargets() []metrics.ScrapeTarget {
	proxy := func(role string, addr netip.AddrPort) metrics.ScrapeTarget {
		return metrics.ScrapeTarget{Job: promJobProxies, Address: addr.String(), Path: "/stats/prometheus",
			Labels: map[string]string{promRoleLabel: role}}
	}
	ts := []metrics.ScrapeTarget{
		{Job: promJobPilot, Address: l.pilot.Addrs.Monitoring, Labels: map[string]string{promRoleLabel: promRoleControlPlane}},
		proxy(results.RoleClientSidecar, netip.AddrPortFrom(l.client.IP(), adminPort)),
		proxy(results.RoleServerSidecar, netip.AddrPortFrom(l.server.IP(), adminPort)),
	}
	if l.waypointPod != nil {
		ts = append(ts, proxy(results.RoleWaypoint, netip.AddrPortFrom(l.waypointPod.IP(), adminPort)))
	}
	for _, n := range l.nodes {
		ts = append(ts, proxy(roleOfName(n.role), netip.AddrPortFrom(n.ns.IP(), nodeProxyStatsPort)))
	}
	return ts
}

// startPrometheus runs Debian's prometheus for the invocation, its config
// and database under the output directory (kept there, so the run's series
// can be looked at again with prometheus --storage.tsdb.path).
func (l *lab) startPrometheus(ctx context.Context) error {
	dir, err := filepath.Abs(filepath.Join(l.cfg.OutDir, "prometheus"))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return fmt.Errorf("lab: --prometheus: %w", err)
	}
	s, err := metrics.StartPrometheus(ctx, metrics.PromServerOptions{Targets: l.promTargets(), Interval: l.cfg.PromInterval, Dir: dir})
	if err != nil {
		return fmt.Errorf("lab: --prometheus: %w", err)
	}
	l.prom = s
	l.pids = append(l.pids, s.PID())
	// Prometheus holds its first scrapes back for a few seconds after it
	// starts (its target discovery sends updates every 5s); a run measured
	// before then would have no samples in its window.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, job := range []string{promJobPilot, promJobProxies} {
		if err := s.WaitScrapedAfter(wctx, job, time.Time{}); err != nil {
			return fmt.Errorf("lab: --prometheus: %w", err)
		}
	}
	return nil
}

// promWait bounds the wait for Prometheus to scrape every proxy after a
// run's window: a few scrape intervals, as a target that is down is
// scraped (and answers up=0) on the same schedule.
func (l *lab) promWait() time.Duration { return 10*time.Second + 3*l.cfg.PromInterval }

// promFigures asks the lab's Prometheus for each proxy's figures over the
// run's steady window [from, to]: the figures the /proc sampler measured
// for the same processes over the same window. A query with nothing to
// compute from is NaN: no istio_requests_total series for a proxy that
// carried only TCP (or a node proxy, which counts connections), no rate
// from a window shorter than two scrapes.
func (l *lab) promFigures(ctx context.Context, procs []results.Process, from, to time.Time) ([]results.PromFigures, error) {
	wctx, cancel := context.WithTimeout(ctx, l.promWait())
	defer cancel()
	if err := l.prom.WaitScrapedAfter(wctx, promJobProxies, to); err != nil {
		return nil, err
	}
	window := fmt.Sprintf("%dms", max(to.Sub(from).Milliseconds(), 1))
	var out []results.PromFigures
	for _, p := range procs {
		if p.ProxyKind() == "" {
			continue
		}
		sel := fmt.Sprintf(`{job=%q,%s=%q}`, promJobProxies, promRoleLabel, p.Role)
		f := results.PromFigures{Role: p.Role}
		for _, q := range []struct {
			dst   *float64
			expr  string
			scale float64
		}{
			{&f.VCPU, `rate(process_cpu_seconds_total` + sel + `[` + window + `])`, 1},
			{&f.RSSMB, `avg_over_time(process_resident_memory_bytes` + sel + `[` + window + `])`, 1 << 20},
			{&f.MaxRSSMB, `max_over_time(process_resident_memory_bytes` + sel + `[` + window + `])`, 1 << 20},
			{&f.RPS, `sum(rate(istio_requests_total` + sel + `[` + window + `]))`, 1},
			{&f.P50, promQuantile(0.5, sel, window), 1},
			{&f.P90, promQuantile(0.9, sel, window), 1},
			{&f.P99, promQuantile(0.99, sel, window), 1},
		} {
			v, err := l.prom.Query(ctx, q.expr, to)
			if err != nil {
				return nil, err
			}
			*q.dst = v / q.scale
		}
		out = append(out, f)
	}
	return out, nil
}

// promQuantile is the q-quantile of the proxy's request durations in the
// window, from its histogram's buckets, ms.
func promQuantile(q float64, sel, window string) string {
	return fmt.Sprintf(`histogram_quantile(%g, sum by (le) (rate(istio_request_duration_milliseconds_bucket%s[%s])))`, q, sel, window)
}
