package kube

import (
	"testing"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// A waypoint's address on Kubernetes is the one its deployment reported in
// the Gateway's status; a Gateway without one is not a waypoint yet.
func TestWaypointSpecTakesTheStatusAddress(t *testing.T) {
	ip := func(v string) gatewayv1.GatewayStatusAddress {
		return gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.IPAddressType), Value: v}
	}
	host := gatewayv1.GatewayStatusAddress{Type: ptr.To(gatewayv1.HostnameAddressType), Value: "waypoint.shop.svc.cluster.local"}
	for _, tc := range []struct {
		name   string
		spec   []gatewayv1.GatewaySpecAddress
		status []gatewayv1.GatewayStatusAddress
		want   string // "" for not a waypoint yet
	}{
		{"from status", nil, []gatewayv1.GatewayStatusAddress{host, ip("10.96.0.20")}, "10.96.0.20"},
		{"spec wins", []gatewayv1.GatewaySpecAddress{{Value: "10.1.0.9"}}, []gatewayv1.GatewayStatusAddress{ip("10.96.0.20")}, "10.1.0.9"},
		{"no address yet", nil, nil, ""},
		{"hostname only", nil, []gatewayv1.GatewayStatusAddress{host}, ""},
	} {
		gw := &gatewayv1.Gateway{Spec: gatewayv1.GatewaySpec{Addresses: tc.spec}, Status: gatewayv1.GatewayStatus{Addresses: tc.status}}
		got := waypointSpec(gw)
		switch spec, _ := got.(*gatewayv1.GatewaySpec); {
		case tc.want == "" && got != nil:
			t.Errorf("%s: %+v, want no waypoint yet", tc.name, got)
		case tc.want != "" && (spec == nil || len(spec.Addresses) != 1 || spec.Addresses[0].Value != tc.want):
			t.Errorf("%s: %+v, want address %s", tc.name, got, tc.want)
		}
	}
	if gw := (&gatewayv1.Gateway{Status: gatewayv1.GatewayStatus{Addresses: []gatewayv1.GatewayStatusAddress{ip("10.96.0.20")}}}); waypointSpec(gw) != nil && len(gw.Spec.Addresses) != 0 {
		t.Errorf("waypointSpec changed the informer's object: %+v", gw.Spec)
	}
}
