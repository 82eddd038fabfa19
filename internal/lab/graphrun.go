package lab

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/meshperf/meshperf/internal/acmeair"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/svcmetrics"
	"github.com/meshperf/meshperf/internal/topology"
)

// isotope's metric names, which `meshperf service` and the Acmeair app's
// services export.
const (
	incomingRequestsMetric = svcmetrics.IncomingRequests
	requestDurationMetric  = svcmetrics.RequestDuration
)

// rolePodSep joins a sampled process's role and pod in the sampler's name
// (names are unique there; a graph has many apps): "app@svc-0".
const rolePodSep = "@"

// runGraphOne runs the load against the graph's entrypoint and reads each
// service's figures from its apps' metrics before and after.
func (l *lab) runGraphOne(ctx context.Context, spec scenario.RunSpec) Outcome {
	g := l.graph
	r := l.base(spec)
	r.Graph = &results.GraphRun{Workload: g.topo.Name, Entrypoint: g.entry.Name, Pods: len(g.pods),
		Hops: g.topo.Hops(g.entry.Name), SetupSeconds: g.setup.Seconds()}
	before, err := l.scrapeGraph(ctx)
	if err != nil {
		return l.failedGraph(spec, r.Graph, err.Error())
	}
	jsonPath := filepath.Join(l.cfg.OutDir, JSONName(spec, r.Label))
	args, env, err := l.graphLoadCommand(spec, r, jsonPath)
	if err != nil {
		return l.failedGraph(spec, r.Graph, err.Error())
	}
	label := r.Label
	r, _, _, reason := l.runLoad(ctx, spec, r, l.graphWatched(), results.RoleLoadGenerator, args, env, jsonPath)
	if g.acmeair {
		// The driver labels its result "acmeair"; the run keeps the
		// lab's label, which tells runs apart.
		r.Label = label
	}
	if reason != "" {
		return l.failedGraph(spec, r.Graph, reason)
	}
	for i := range r.Processes {
		if role, podName, ok := strings.Cut(r.Processes[i].Role, rolePodSep); ok {
			r.Processes[i].Role, r.Processes[i].Pod = role, podName
		}
	}
	if g.acmeair {
		// Booking's reward updates run on after its answer, for at most
		// their timeout: let them end before the services are read, so
		// that what each app served and what its sidecar counted are
		// both final.
		sleepCtx(ctx, acmeair.DefaultRewardTimeout+100*time.Millisecond)
	}
	after, err := l.scrapeGraph(ctx)
	if err != nil {
		r.Failed, r.FailureReason = true, err.Error()
		return Outcome{Run: r}
	}
	if g.acmeair {
		if r.Graph.Transactions, err = readTransactions(jsonPath); err != nil {
			r.Failed, r.FailureReason = true, err.Error()
			return Outcome{Run: r}
		}
	}
	r.Graph.Services = g.figures(before, after)
	checks := l.graphChecks(spec, r.Calls, before, after)
	for _, c := range checks {
		if !c.OK && !r.Failed {
			r.Failed, r.FailureReason = true, "traffic check: "+c.Name+": "+c.Detail
		}
	}
	return Outcome{Run: r, Checks: checks}
}

func (l *lab) failedGraph(spec scenario.RunSpec, gr *results.GraphRun, reason string) Outcome {
	o := l.failed(spec, reason)
	o.Run.Graph = gr
	return o
}

// graphLoadCommand is the load's command: `meshperf load` to the
// entrypoint's cluster IP with the entrypoint's Host, or for the Acmeair
// app its driver.
func (l *lab) graphLoadCommand(spec scenario.RunSpec, r results.Run, jsonPath string) (args, env []string, err error) {
	g := l.graph
	if g.acmeair {
		return l.acmeairDriveCommand(spec, jsonPath), nil, nil
	}
	entry := netip.AddrPortFrom(g.entry.vip, topology.ServicePort)
	target := []string{"-H", fmt.Sprintf("Host: %s:%d", g.entry.Name, topology.ServicePort), "http://" + entry.String() + "/"}
	if g.injectsErrors() {
		// A service that fails a share of its requests on purpose can
		// fail a connection's warm-up call too; those errors are the
		// graph's, counted in the run like every other.
		target = append([]string{"-allow-initial-errors"}, target...)
	}
	return l.loadCommand(spec, r, jsonPath, target)
}

// graphWatched are the processes a graph run depends on, with their
// roles: the control plane, every app and sidecar, the node proxies.
func (l *lab) graphWatched() []watchedProcess {
	g := l.graph
	out := []watchedProcess{{results.RoleControlPlane, l.pilot.Process}}
	if g.clientSC != nil {
		out = append(out, watchedProcess{results.RoleGraphSidecar + rolePodSep + ClientPod, g.clientSC})
	}
	for _, gp := range g.pods {
		out = append(out, watchedProcess{results.RoleGraphApp + rolePodSep + gp.pod.Name(), gp.app})
		if gp.sidecar != nil {
			out = append(out, watchedProcess{results.RoleGraphSidecar + rolePodSep + gp.pod.Name(), gp.sidecar})
		}
	}
	for _, n := range l.nodes {
		if n.proxy != nil {
			out = append(out, watchedProcess{roleOfName(n.role), n.proxy})
		}
	}
	return out
}

// graphSnapshot is the graph's metrics at one moment: each app's (by pod),
// each sidecar's and each node proxy's Prometheus text.
type graphSnapshot struct {
	apps     map[string]*metrics.Snapshot
	sidecars map[string]string // by pod, the client's included
	nodes    map[string]string // by node proxy role
}

// scrapeGraph reads every app's /metrics from inside its pod, and every
// proxy's stats, several at a time.
func (l *lab) scrapeGraph(ctx context.Context) (graphSnapshot, error) {
	g := l.graph
	s := graphSnapshot{apps: map[string]*metrics.Snapshot{}, sidecars: map[string]string{}, nodes: map[string]string{}}
	var mu sync.Mutex
	var eg errgroup.Group
	eg.SetLimit(convergeParallel)
	sidecar := func(name string, a *admin) {
		eg.Go(func() error {
			text, err := a.metrics(ctx)
			mu.Lock()
			defer mu.Unlock()
			s.sidecars[name] = text
			return err
		})
	}
	if g.clientSC != nil {
		sidecar(ClientPod, newAdmin(g.client.IP()))
	}
	for _, gp := range g.pods {
		eg.Go(func() error {
			a := appAdmin(gp)
			snap, err := metrics.Scrape(ctx, a.client, a.base+"/metrics")
			if err != nil {
				return fmt.Errorf("%s: %w", gp.pod.Name(), err)
			}
			mu.Lock()
			defer mu.Unlock()
			s.apps[gp.pod.Name()] = snap
			return nil
		})
		if gp.sidecar != nil {
			sidecar(gp.pod.Name(), newAdmin(gp.pod.IP()))
		}
	}
	for _, n := range l.nodes {
		if n.proxy == nil {
			continue
		}
		eg.Go(func() error {
			text, err := nodeStats(n).metrics(ctx)
			mu.Lock()
			defer mu.Unlock()
			s.nodes[n.role] = text
			return err
		})
	}
	if err := eg.Wait(); err != nil {
		return s, fmt.Errorf("graph metrics: %w", err)
	}
	return s, nil
}

// figures are each service's figures over the run, summed over its
// replicas: requests, non-2xx answers and latency from its duration
// histogram's buckets.
func (g *graphLab) figures(before, after graphSnapshot) []results.ServiceFigures {
	var out []results.ServiceFigures
	for _, s := range g.services {
		var b, a []*metrics.Snapshot
		for _, gp := range s.pods {
			b, a = append(b, before.apps[gp.pod.Name()]), append(a, after.apps[gp.pod.Name()])
		}
		mb, ma := metrics.Merge(b...), metrics.Merge(a...)
		f := results.ServiceFigures{Name: s.Name, Replicas: len(s.pods),
			Requests: int64(math.Round(ma.Sum(incomingRequestsMetric) - mb.Sum(incomingRequestsMetric)))}
		f.Errors = int64(math.Round(non2xx(ma) - non2xx(mb)))
		f.Latency = histogramLatency(ma.Histogram(requestDurationMetric).Sub(mb.Histogram(requestDurationMetric)))
		out = append(out, f)
	}
	return out
}

// non2xx counts the answers other than 2xx in a service's duration
// histogram, whose code label is the status.
func non2xx(s *metrics.Snapshot) float64 {
	n := 0.0
	for code, c := range s.HistogramCountBy(requestDurationMetric, "code") {
		if !strings.HasPrefix(code, "2") {
			n += c
		}
	}
	return n
}

// histogramLatency reads a duration histogram (seconds) as the results'
// latency (ms): the percentiles interpolated within buckets, the mean from
// the sum; no minimum or maximum (a histogram has none). NaN throughout
// when it counted nothing.
func histogramLatency(h metrics.Histogram) results.Latency {
	ms := func(q float64) float64 { return h.Quantile(q) * 1000 }
	avg := math.NaN()
	if h.Count > 0 {
		avg = h.Sum / h.Count * 1000
	}
	return results.Latency{Min: math.NaN(), Max: math.NaN(), Avg: avg,
		P50: ms(0.5), P75: ms(0.75), P90: ms(0.9), P99: ms(0.99), P999: ms(0.999), P9999: ms(0.9999)}
}
