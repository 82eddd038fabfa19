package shape

import (
	"errors"
	"fmt"
	"net/netip"
)

// LargeLoadTestOptions describe the shape of Istio's large load test.
type LargeLoadTestOptions struct {
	Namespaces int // service-graph00, service-graph01, ...
	// Replicas per Deployment; istio/tools perf/load's values.yaml has 2.
	Replicas int
	// Fanout is how many children the root service calls, each of which calls
	// one grandchild: 9 in the generated service graph (10 with its VM
	// option), giving 19 services, which its README calls "a large tree of
	// 20 services".
	Fanout  int
	Seed    uint64
	FirstIP netip.Addr
}

// IstioLargeLoadTest generates Istio's large load test mesh (istio/tools
// perf/load, set up by setup_large_test.sh NUM): one namespace
// service-graphNN per instance, each holding the isotope service graph as
// that repository generates it. Assumptions, from its templates rather than
// published figures: services svc-0 (the entrypoint, with Deployments v1 and
// v2), svc-0-K for K < Fanout and svc-0-K-0 below each; one port 8080 named
// "http"; pods labelled app=SERVICE, role=service, version=v1 (v2 for the
// root's second Deployment). Its Fortio load client and ingress are left out:
// they are not part of the mesh's configuration size.
func IstioLargeLoadTest(o LargeLoadTestOptions) (*Mesh, error) {
	if o.Namespaces <= 0 {
		return nil, errors.New("large load test mesh: namespaces must be positive")
	}
	if o.Replicas == 0 {
		o.Replicas = 2
	}
	if o.Fanout == 0 {
		o.Fanout = 9
	}
	if o.Replicas < 0 || o.Fanout < 0 {
		return nil, errors.New("large load test mesh: replicas and fanout must not be negative")
	}
	g, err := newGenerator(o.Seed, o.FirstIP)
	if err != nil {
		return nil, fmt.Errorf("large load test mesh: %w", err)
	}
	ports := []Port{{Name: "http", Number: 8080}}
	for n := range o.Namespaces {
		ns := fmt.Sprintf("service-graph%02d", n)
		g.add(namespace(ns, nil))
		names := []string{"svc-0"}
		for k := range o.Fanout {
			names = append(names, fmt.Sprintf("svc-0-%d", k))
		}
		for k := range o.Fanout {
			names = append(names, fmt.Sprintf("svc-0-%d-0", k))
		}
		for i, name := range names {
			app := map[string]string{"app": name}
			g.add(service(ns, name, map[string]string{"app": "service-graph"}, app, ports))
			versions := []string{"v1"}
			if i == 0 {
				versions = append(versions, "v2")
			}
			for _, v := range versions {
				deployment := name
				if i == 0 {
					deployment = name + v // the root's Deployments are svc-0v1 and svc-0v2
				}
				labels := map[string]string{"app": name, "role": "service", "version": v}
				if err := g.pods(ns, deployment, o.Replicas, labels, "default", false); err != nil {
					return nil, fmt.Errorf("large load test mesh: %w", err)
				}
			}
		}
	}
	m, err := g.check()
	if err != nil {
		return nil, fmt.Errorf("large load test mesh: %w", err)
	}
	return m, nil
}
