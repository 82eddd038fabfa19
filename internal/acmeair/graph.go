package acmeair

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/topology"
)

// AppName is the app's name in scenarios (app: acmeair) and results.
const AppName = "acmeair"

// Graph is the app as a graph of pods: its five services,
// one replica each, and who calls whom (login asks customer; booking asks
// flight and customer), which is what the lab needs of it. Its load is
// BluePerf's driver, which calls auth, customer, flight and booking; auth,
// where every user starts, stands as the entrypoint.
func Graph() *topology.Topology {
	calls := func(names ...string) topology.Script {
		var sc topology.Script
		for _, n := range names {
			sc = append(sc, topology.Step{Call: &topology.Call{Service: n, Hostname: fmt.Sprintf("%s:%d", n, topology.ServicePort)}})
		}
		return sc
	}
	t := &topology.Topology{Name: AppName, Defaults: topology.Defaults{Type: topology.HTTP, NumReplicas: 1}}
	for _, name := range Services {
		svc := topology.Service{Name: name, Type: topology.HTTP, NumReplicas: 1}
		switch name {
		case ServiceAuth:
			svc.IsEntrypoint, svc.Script = true, calls(ServiceCustomer)
		case ServiceBooking:
			svc.Script = calls(ServiceFlight, ServiceCustomer)
		}
		t.Services = append(t.Services, svc)
	}
	return t
}
