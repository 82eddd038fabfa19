package snapshot

import (
	"istio.io/istio/pkg/workloadapi"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// waypointKey names a waypoint Gateway.
type waypointKey struct{ namespace, name string }

// waypoint is a waypoint Gateway as bindings need it.
type waypoint struct {
	waypointKey
	address string
	serves  string // config.WaypointFor*: service, workload, all or none
}

// servesTraffic says whether the waypoint takes traffic addressed to target
// (config.WaypointForService or config.WaypointForWorkload).
func (w *waypoint) servesTraffic(target string) bool {
	return w.serves == target || w.serves == config.WaypointForAll
}

func waypointsOf(rs []*config.Resource) map[waypointKey]*waypoint {
	out := map[waypointKey]*waypoint{}
	for _, r := range rs {
		spec, ok := r.Spec.(*gatewayv1.GatewaySpec)
		if !ok {
			continue
		}
		k := waypointKey{r.Meta.Namespace, r.Meta.Name}
		out[k] = &waypoint{waypointKey: k, address: config.WaypointAddress(spec), serves: config.WaypointFor(r)}
	}
	return out
}

// boundWaypoint is the waypoint an object of namespace with labels uses:
// its own istio.io/use-waypoint, else its namespace's ("none" opts out at
// either level), in the namespace istio.io/use-waypoint-namespace names
// beside that label, else the object's. Nil when it uses none, or names a
// Gateway that does not exist.
func (s *Snapshot) boundWaypoint(namespace string, labels map[string]string) *waypoint {
	from := labels
	name, ok := labels[config.UseWaypointLabel]
	if !ok {
		from = s.Registry.Namespaces[namespace]
		name, ok = from[config.UseWaypointLabel]
	}
	if !ok || name == "" || name == config.UseWaypointNone {
		return nil
	}
	if ns := from[config.UseWaypointNamespaceLabel]; ns != "" {
		namespace = ns
	}
	return s.waypoints[waypointKey{namespace, name}]
}

// isWaypointPod says whether a workload is a waypoint's own pod: labelled
// with the name of a waypoint Gateway of its namespace. Its traffic never
// goes through a waypoint, and it takes only HBONE.
func (s *Snapshot) isWaypointPod(w *model.Workload) bool {
	name, ok := w.Labels[config.GatewayNameLabel]
	return ok && s.waypoints[waypointKey{w.Namespace, name}] != nil
}

// workloadWaypoint is the WDS waypoint of a workload: its bound waypoint
// when that serves workloads.
func (s *Snapshot) workloadWaypoint(w *model.Workload) *workloadapi.GatewayAddress {
	if s.isWaypointPod(w) {
		return nil
	}
	if wp := s.boundWaypoint(w.Namespace, w.Labels); wp != nil && wp.servesTraffic(config.WaypointForWorkload) {
		return generate.WaypointAddress(wp.address)
	}
	return nil
}

// serviceWaypoint is the WDS waypoint of a service: its bound waypoint when
// that serves services (the default).
func (s *Snapshot) serviceWaypoint(svc *model.Service) *workloadapi.GatewayAddress {
	if wp := s.boundWaypoint(svc.Namespace, svc.Labels); wp != nil && wp.servesTraffic(config.WaypointForService) {
		return generate.WaypointAddress(wp.address)
	}
	return nil
}
