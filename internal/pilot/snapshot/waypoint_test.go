package snapshot

import (
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

func waypointProxy(gateway string) *model.Proxy {
	return &model.Proxy{ID: "waypoint~10.1.0.9~waypoint-1.shop~shop.svc.cluster.local", Type: model.Waypoint,
		Namespace: "shop", PodName: "waypoint-1", IPAddresses: []string{"10.1.0.9"}, ServiceAccount: "waypoint",
		Labels: map[string]string{config.GatewayNameLabel: gateway}}
}

// The shop waypoint's whole Envoy config: HBONE termination, an L7 chain
// for reviews (VirtualService routes to DestinationRule subsets) and a TCP
// chain for ratings and for other/stock, HBONE origination, and endpoints as
// internal addresses with their tunnel destination. The waypoint side of
// meshperf-proxy reads this golden too.
func TestGoldenWaypoint(t *testing.T) {
	p := waypointProxy("waypoint")
	goldenProxy(t, "waypoint.golden", buildFrom(t, "waypoint.yaml"), p)
}

func resourceNames(rs []Resource) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// Only the services bound to a waypoint that serves services are its
// clusters: details opted out, the workload waypoint serves no services, a
// waypoint whose Gateway does not exist serves nothing.
func TestWaypointServesItsBoundServices(t *testing.T) {
	s := buildFrom(t, "waypoint.yaml")
	cases := map[string][]string{
		"waypoint": {"main_internal", "connect_originate", "outbound|9080||reviews.shop.svc.cluster.local",
			"outbound|9080|v1|reviews.shop.svc.cluster.local", "outbound|9080|v2|reviews.shop.svc.cluster.local",
			"outbound|9000||ratings.shop.svc.cluster.local", "outbound|80||stock.other.svc.cluster.local"},
		"pods":    {"main_internal", "connect_originate"},
		"missing": {"main_internal", "connect_originate"},
	}
	for gw, want := range cases {
		got, err := s.Generate(waypointProxy(gw), ClusterType, nil)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Sort(want); !slices.Equal(sorted(resourceNames(got)), want) {
			t.Errorf("waypoint %s: clusters %v, want %v", gw, resourceNames(got), want)
		}
		// main_internal only with a chain: a listener without one is
		// rejected by Envoy and meshperf-proxy, with the whole response.
		wantListeners := []string{"connect_terminate", "main_internal", "connect_originate"}
		if gw != "waypoint" {
			wantListeners = []string{"connect_terminate", "connect_originate"}
		}
		ls, err := s.Generate(waypointProxy(gw), ListenerType, nil)
		if err != nil || !slices.Equal(resourceNames(ls), wantListeners) {
			t.Errorf("waypoint %s: listeners %v, want %v (%v)", gw, resourceNames(ls), wantListeners, err)
		}
		for _, r := range ls {
			var l listenerv3.Listener
			if err := r.Body.UnmarshalTo(&l); err != nil {
				t.Fatal(err)
			}
			if len(l.GetFilterChains()) == 0 && l.GetDefaultFilterChain() == nil {
				t.Errorf("waypoint %s: listener %s has no filter chain", gw, l.GetName())
			}
		}
	}
	if rs, err := s.Generate(waypointProxy("waypoint"), RouteType, []string{"9080"}); err != nil || len(rs) != 0 {
		t.Errorf("a waypoint was sent routes: %v, %v", resourceNames(rs), err)
	}
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// A waypoint is pushed when what it is sent changes: its services'
// endpoints, its Gateway, a VirtualService of its services; not when an
// unrelated service comes.
func TestWaypointDigestFollowsContent(t *testing.T) {
	p := waypointProxy("waypoint")
	dig := func(files ...string) string {
		d, err := buildFrom(t, files...).WaypointDigest(p)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := dig("waypoint.yaml")
	if again := dig("waypoint.yaml"); again != base {
		t.Errorf("same config, digests %s and %s", base, again)
	}
	if d := dig("waypoint.yaml", "waypoint-more-endpoints.yaml"); d == base {
		t.Error("a new endpoint of reviews left the waypoint's digest unchanged")
	}
	if d := dig("waypoint.yaml", "waypoint-unrelated.yaml"); d != base {
		t.Error("services in unbound namespaces changed the waypoint's digest")
	}
}
