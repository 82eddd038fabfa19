package lab

import (
	"fmt"
	"math"

	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// graphChecks confirm that a graph run's traffic went where its mode says
// and that the services behaved as the topology says: the entrypoint served
// every call of the load; in both-sidecars every sidecar counted, as the
// server side, every request its app served (so none reached an app
// around its sidecar), and the client's sidecar every call of the load; in
// ambient the node proxies opened the load's connections and delivered
// every serving pod's, in mutual TLS; and each service failed as often as
// its error rate says.
func (l *lab) graphChecks(spec scenario.RunSpec, calls int64, before, after graphSnapshot) []Check {
	g := l.graph
	var out []Check
	if g.acmeair {
		// The driver calls every service it exercises, not one entrypoint.
		out = append(out, Check{Name: "driver", OK: calls > 0, Detail: fmt.Sprintf("%d calls made", calls)})
	} else {
		entry := 0.0
		for _, gp := range g.entry.pods {
			entry += appRequests(gp, before, after)
		}
		out = append(out, Check{Name: "entrypoint " + g.entry.Name, OK: entry >= float64(calls) && calls > 0,
			Detail: fmt.Sprintf("%.0f requests served, the load made %d", entry, calls)})
	}
	if client, _ := spec.Mode.Sidecars(); client {
		out = append(out, l.graphSidecarChecks(spec, calls, before, after)...)
	}
	if spec.Mode.NodeProxies() {
		out = append(out, l.graphNodeProxyChecks(spec, before, after)...)
	}
	return append(out, g.errorChecks(before, after)...)
}

// appRequests is how many requests gp's app served between the snapshots.
func appRequests(gp *graphPod, before, after graphSnapshot) float64 {
	name := gp.pod.Name()
	return after.apps[name].Sum(incomingRequestsMetric) - before.apps[name].Sum(incomingRequestsMetric)
}

// graphSidecarChecks: the client's sidecar sent every call of the load to
// the entrypoint, and each pod's sidecar received at least the requests
// its app served. One check for all the pods, naming the first that falls
// short.
func (l *lab) graphSidecarChecks(spec scenario.RunSpec, calls int64, before, after graphSnapshot) []Check {
	g := l.graph
	// The Acmeair driver stops when its time is up, resetting the requests
	// its users have in flight: an app may have answered one (and counted
	// it) that its sidecar, whose caller has gone, never finished. At most
	// one per user. The load generator of a topology lets its last
	// requests end, so there every request is counted at both ends.
	cut := 0.0
	if g.acmeair {
		cut = float64(spec.Connections)
	}
	delta := func(pod string, labels map[string]string) float64 {
		return SumMetric(after.sidecars[pod], "istio_requests_total", labels) -
			SumMetric(before.sidecars[pod], "istio_requests_total", labels)
	}
	// The load goes to the entrypoint; the Acmeair driver to every
	// service it exercises.
	to := map[string]string{"reporter": "source", "destination_service": g.entry.host()}
	where := g.entry.host()
	if g.acmeair {
		delete(to, "destination_service")
		where = "the services"
	}
	sent := delta(ClientPod, to)
	out := []Check{{Name: "client sidecar", OK: sent >= float64(calls) && calls > 0,
		Detail: fmt.Sprintf("%.0f requests to %s counted, want >= %d", sent, where, calls)}}
	short, carried := "", 0
	for _, gp := range g.pods {
		served := appRequests(gp, before, after)
		seen := delta(gp.pod.Name(), map[string]string{"reporter": "destination"})
		if seen < served-cut && short == "" {
			short = fmt.Sprintf("%s: %.0f requests counted, its app served %.0f", gp.pod.Name(), seen, served)
			if cut > 0 {
				short += fmt.Sprintf(" (%.0f may be cut at the end)", cut)
			}
		}
		if served > 0 {
			carried++
		}
	}
	detail := fmt.Sprintf("%d sidecars counted every request their app served (%d apps served some)", len(g.pods), carried)
	if short != "" {
		detail = short
	}
	return append(out, Check{Name: "every pod's sidecar", OK: short == "" && carried > 0, Detail: detail})
}

// graphNodeProxyChecks: the client's node proxy opened the load's
// connections, and every pod that served requests had them delivered by a
// node proxy, over HBONE in mutual TLS (its own node's, whether the caller
// was on the same node or the other). Apps keep their connections from
// one run to the next, so a later run of the mode may open none: the pods'
// side counts the connections since the mode was set up (the node proxies
// and the apps start with it), at least one.
func (l *lab) graphNodeProxyChecks(spec scenario.RunSpec, before, after graphSnapshot) []Check {
	const metric = "istio_tcp_connections_opened_total"
	sum := func(s graphSnapshot, labels map[string]string) float64 {
		n := 0.0
		for _, text := range s.nodes {
			n += SumMetric(text, metric, labels)
		}
		return n
	}
	client := map[string]string{"reporter": "source", "source_workload": ClientPod}
	opened := sum(after, client) - sum(before, client)
	want := float64(max(spec.Connections, 1))
	out := []Check{{Name: "client node proxy", OK: opened >= want,
		Detail: fmt.Sprintf("%.0f connections opened for the load generator, want >= %.0f", opened, want)}}
	short, carried := "", 0
	for _, gp := range l.graph.pods {
		if appRequests(gp, before, after) <= 0 {
			continue
		}
		carried++
		got := sum(after, map[string]string{"reporter": "destination", "destination_workload": gp.pod.Name(),
			"connection_security_policy": "mutual_tls"})
		if got < 1 && short == "" {
			short = gp.pod.Name() + ": its app served requests, but no node proxy delivered it a connection in mutual TLS since the mode was set up"
		}
	}
	detail := fmt.Sprintf("%d pods that served requests had their connections delivered in mutual TLS", carried)
	if short != "" {
		detail = short
	}
	return append(out, Check{Name: "every pod's node proxy", OK: short == "" && carried > 0, Detail: detail})
}

// errorChecks compare each failing service's errors with its error rate:
// each replica fails one request in ErrorEvery, so the service fails at
// least the sum of its replicas' whole shares; and, when nothing it calls
// can fail (which its own answers would pass on as 500s), at most the sum
// rounded up.
func (g *graphLab) errorChecks(before, after graphSnapshot) []Check {
	var out []Check
	for _, s := range g.services {
		every := s.ErrorEvery()
		if every == 0 {
			continue
		}
		low, high := 0.0, 0.0
		for _, gp := range s.pods {
			n := appRequests(gp, before, after)
			low += math.Floor(n / float64(every))
			high += math.Ceil(n / float64(every))
		}
		errs := non2xxOf(s, before, after)
		ok := errs >= low
		want := fmt.Sprintf(">= %.0f", low)
		if !g.canFailBelow(s) {
			ok = ok && errs <= high
			want = fmt.Sprintf("%.0f to %.0f", low, high)
		}
		out = append(out, Check{Name: "errors of " + s.Name, OK: ok,
			Detail: fmt.Sprintf("%.0f errors, want %s (one in %d requests)", errs, want, every)})
	}
	return out
}

// non2xxOf is how many non-2xx answers s's replicas gave between the
// snapshots.
func non2xxOf(s *graphService, before, after graphSnapshot) float64 {
	n := 0.0
	for _, gp := range s.pods {
		n += non2xx(after.apps[gp.pod.Name()]) - non2xx(before.apps[gp.pod.Name()])
	}
	return n
}

// canFailBelow says whether a service s calls, directly or not, has an
// error rate.
func (g *graphLab) canFailBelow(s *graphService) bool {
	seen := map[string]bool{}
	var walk func(s *graphService) bool
	walk = func(s *graphService) bool {
		for _, c := range g.callees(s) {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			if c.ErrorEvery() > 0 || walk(c) {
				return true
			}
		}
		return false
	}
	return walk(s)
}
