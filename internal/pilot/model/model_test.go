package model

import (
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func TestMergeFollowsIstiodsRules(t *testing.T) {
	t0 := time.Unix(100, 0)
	vs := config.Key{Kind: config.KindVirtualService, Namespace: "a", Name: "x"}
	se := config.Key{Kind: config.KindServiceEntry, Namespace: "b", Name: "y"}
	a := NewPushRequest(ReasonEndpoint, false, t0.Add(time.Second), se)
	b := NewPushRequest(ReasonConfig, true, t0, vs)
	c := NewPushRequest(ReasonEndpoint, false, t0.Add(2*time.Second), se)
	m := a.Merge(b).Merge(c)
	if !m.Full || len(m.ConfigsUpdated) != 2 || m.Reason[ReasonEndpoint] != 2 || m.Reason[ReasonConfig] != 1 || !m.Start.Equal(t0) {
		t.Errorf("merged %+v", m)
	}
	if m.Reasons() != 3 {
		t.Errorf("Reasons() = %d", m.Reasons())
	}
	if a.Full || len(a.ConfigsUpdated) != 1 || a.Reason[ReasonEndpoint] != 1 {
		t.Errorf("Merge changed its receiver: %+v", a)
	}
	var none *PushRequest
	if got := none.Merge(b); got == b || !got.Full {
		t.Errorf("nil.Merge should copy the other request")
	}
}

func TestParseNodeID(t *testing.T) {
	p, err := ParseNodeID("sidecar~10.1.0.7~reviews-v1-abc.bookinfo~bookinfo.svc.cluster.local")
	if err != nil || p.Type != Sidecar || p.IPAddresses[0] != "10.1.0.7" || p.PodName != "reviews-v1-abc" ||
		p.Namespace != "bookinfo" || p.DNSDomain != "bookinfo.svc.cluster.local" {
		t.Errorf("%+v, %v", p, err)
	}
	z, err := ParseNodeID("ztunnel~10.0.0.1~ztunnel-node1.istio-system~istio-system.svc.cluster.local")
	if err != nil || z.Type != Ztunnel || z.PodName != "ztunnel-node1" || z.Namespace != "istio-system" {
		t.Errorf("ztunnel id: %+v, %v", z, err)
	}
	if w, err := ParseNodeID("waypoint~10.0.0.9~waypoint-0.shop~shop.svc.cluster.local"); err != nil || w.Type != Waypoint {
		t.Errorf("waypoint id: %+v, %v", w, err)
	}
	for _, bad := range []string{"", "sidecar~1.2.3.4~pod", "box~1.2.3.4~p.ns~ns.svc.cluster.local", "router~1.2.3.4~nodot~d"} {
		if _, err := ParseNodeID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
