package snapshot

import (
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

const ingressGateway = `
apiVersion: networking.istio.io/v1
kind: Gateway
metadata: {name: ingress, namespace: istio-system}
spec:
  selector: {istio: ingressgateway}
  servers:
  - port: {number: 80, name: http, protocol: HTTP}
    hosts: ["*/shop.example.com"]
---
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: shop-ingress, namespace: shop}
spec:
  hosts: [shop.example.com]
  gateways: [istio-system/ingress]
  http:
  - route:
    - destination: {host: cart, subset: v1}
`

func router(pod string) *model.Proxy {
	return &model.Proxy{ID: "router~10.0.0.9~" + pod + ".istio-system~istio-system.svc.cluster.local",
		Type: model.Router, Namespace: "istio-system", PodName: pod, ServiceAccount: "istio-ingressgateway",
		Labels: map[string]string{"istio": "ingressgateway"}, IPAddresses: []string{"10.0.0.9"}}
}

func TestRouterGetsGatewayConfig(t *testing.T) {
	gw, gw2 := router("ingress-1"), router("ingress-2")
	side := proxy("shop", "cart-1", map[string]string{"app": "cart", "version": "v1"})
	s := build(t, ingressGateway, gw, gw2, side)

	ls, err := s.Generate(gw, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ls); len(got) != 1 || !got["0.0.0.0_80"] {
		t.Fatalf("gateway listeners %v, want only 0.0.0.0_80 (no virtualOutbound, no virtualInbound)", got)
	}
	var l listenerv3.Listener
	if err := ls[0].Body.UnmarshalTo(&l); err != nil || !l.GetBindToPort().GetValue() || !contains(ls[0].Body.Value, "http.80") {
		t.Errorf("gateway listener %v binds %v, routes from http.80: %v", err, l.GetBindToPort(), contains(ls[0].Body.Value, "http.80"))
	}
	ls2, err := s.Generate(gw2, ListenerType, nil)
	if err != nil || ls2[0].Body != ls[0].Body {
		t.Errorf("two proxies of one gateway should share the encoded listener (%v)", err)
	}

	rs, err := s.Generate(gw, RouteType, []string{"http.80"})
	if err != nil || len(rs) != 1 {
		t.Fatalf("%d route configs, %v", len(rs), err)
	}
	var rc routev3.RouteConfiguration
	if err := rs[0].Body.UnmarshalTo(&rc); err != nil {
		t.Fatal(err)
	}
	if len(rc.VirtualHosts) != 1 || rc.VirtualHosts[0].Name != "shop.example.com:80" ||
		rc.VirtualHosts[0].Routes[0].GetRoute().GetCluster() != "outbound|80|v1|cart.shop.svc.cluster.local" {
		t.Errorf("http.80: %v", rc.VirtualHosts)
	}

	cs, err := s.Generate(gw, ClusterType, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := names(cs)
	if !got["outbound|80|v1|cart.shop.svc.cluster.local"] || !got[generate.BlackHoleCluster] || got[generate.PassthroughCluster] || got["inbound|8080||"] {
		t.Errorf("gateway clusters %v: want outbound and BlackHole, no Passthrough, no inbound", got)
	}
	eps, err := s.Generate(gw, EndpointType, []string{"outbound|80|v1|cart.shop.svc.cluster.local"})
	if err != nil || len(eps) != 1 {
		t.Errorf("%d load assignments, %v", len(eps), err)
	}

	// The sidecar in the same snapshot keeps its capture listeners.
	sl, err := s.Generate(side, ListenerType, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(sl); !got["virtualOutbound"] || !got["virtualInbound"] {
		t.Errorf("sidecar listeners %v", got)
	}
}
