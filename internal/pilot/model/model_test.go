package model

import (
	"strings"
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
	// A pod name is a DNS subdomain and may hold dots; a namespace cannot.
	if d, err := ParseNodeID("sidecar~fd00::7~web.v1-abc.shop~shop.svc.cluster.local"); err != nil || d.PodName != "web.v1-abc" || d.Namespace != "shop" {
		t.Errorf("dotted pod name: %+v, %v", d, err)
	}
	// No IP in the id: INSTANCE_IPS must then give one (Validate).
	if e, err := ParseNodeID("router~~gw-1.istio-system~istio-system.svc.cluster.local"); err != nil || len(e.IPAddresses) != 0 {
		t.Errorf("empty IP: %+v, %v", e, err)
	}
	for _, bad := range []string{
		"", "sidecar~1.2.3.4~pod", "box~1.2.3.4~p.ns~ns.svc.cluster.local", "router~1.2.3.4~nodot~d",
		"sidecar~not-an-ip~a.shop~shop.svc.cluster.local",
		"sidecar~fe80::1%eth0~a.shop~shop.svc.cluster.local", // a zone: Envoy takes no zone
		"sidecar~10.0.0.1~a.Bad_NS!~shop.svc.cluster.local",
		"sidecar~10.0.0.1~A_Pod.shop~shop.svc.cluster.local",
		"sidecar~10.0.0.1~.shop~shop.svc.cluster.local",
		"sidecar~10.0.0.1~a.~shop.svc.cluster.local",
		"sidecar~10.0.0.1~a.shop~shop svc",
	} {
		if _, err := ParseNodeID(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// validProxy is a sidecar's registration as the lab's sidecars send it.
func validProxy() *Proxy {
	return &Proxy{ID: "sidecar~10.0.0.7~cart-1.shop~shop.svc.cluster.local", Type: Sidecar,
		IPAddresses: []string{"10.0.0.7", "fd00::7"}, PodName: "cart-1", Namespace: "shop",
		DNSDomain: "shop.svc.cluster.local", ServiceAccount: "cart", WorkloadName: "cart-v1",
		Labels: map[string]string{"app": "cart", "security.istio.io/tlsMode": "istio", "version": ""}}
}

func TestValidateRefusesWhatIstiodRefuses(t *testing.T) {
	if err := validProxy().Validate(); err != nil {
		t.Fatalf("a valid sidecar refused: %v", err)
	}
	// What meshperf-proxy --proxy-type ztunnel and the real ztunnel send
	// (NAMESPACE, INSTANCE_IPS, no service account or labels), and a
	// waypoint with the label naming its Gateway.
	ztunnel := &Proxy{ID: "ztunnel~10.0.0.9~ztunnel-node-1.istio-system~istio-system.svc.cluster.local", Type: Ztunnel,
		IPAddresses: []string{"10.0.0.9"}, PodName: "ztunnel-node-1", Namespace: "istio-system", DNSDomain: "istio-system.svc.cluster.local"}
	waypoint := &Proxy{ID: "waypoint~127.0.0.1~wp-1.shop~shop.svc.cluster.local", Type: Waypoint,
		IPAddresses: []string{"127.0.0.1"}, PodName: "wp-1", Namespace: "shop", DNSDomain: "shop.svc.cluster.local",
		ServiceAccount: "waypoint", WorkloadName: "wp-1", Labels: map[string]string{"gateway.networking.k8s.io/gateway-name": "waypoint"}}
	for _, p := range []*Proxy{ztunnel, waypoint} {
		if err := p.Validate(); err != nil {
			t.Errorf("%s refused: %v", p.Type, err)
		}
	}

	huge := strings.Repeat("x", 1<<20)
	for name, c := range map[string]struct {
		change func(p *Proxy)
		want   string
	}{
		"no IP":               {func(p *Proxy) { p.IPAddresses = nil }, "no IP address"},
		"IP not an IP":        {func(p *Proxy) { p.IPAddresses = []string{"10.0.0.7", "not-an-ip"} }, `IP "not-an-ip" is not an IP address`},
		"namespace":           {func(p *Proxy) { p.Namespace = "Bad_NS!" }, `namespace "Bad_NS!" is not a DNS-1123 label`},
		"namespace with dots": {func(p *Proxy) { p.Namespace = "a.b" }, "is not a DNS-1123 label"},
		"service account":     {func(p *Proxy) { p.ServiceAccount = "SA/../x" }, "service account"},
		"workload name":       {func(p *Proxy) { p.WorkloadName = "Cart V1" }, "workload name"},
		"pod name":            {func(p *Proxy) { p.PodName = "cart_1" }, "pod name"},
		"label key":           {func(p *Proxy) { p.Labels["bad key"] = "x" }, `label key "bad key"`},
		"label value":         {func(p *Proxy) { p.Labels["app"] = "not a label value!" }, `label app: value "not a label value!"`},
		"long label value":    {func(p *Proxy) { p.Labels["app"] = strings.Repeat("a", 64) }, "label app"},
		"type":                {func(p *Proxy) { p.Type = "box" }, `type "box"`},
		"huge namespace":      {func(p *Proxy) { p.Namespace = huge }, "(1048576 bytes)"},
		"huge IP":             {func(p *Proxy) { p.IPAddresses = []string{huge} }, "(1048576 bytes)"},
		"huge label value":    {func(p *Proxy) { p.Labels["app"] = huge }, "(1048576 bytes)"},
	} {
		p := validProxy()
		c.change(p)
		err := p.Validate()
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cart-1.shop") {
			t.Errorf("%s: %v, want %q and the node", name, err, c.want)
		}
		if len(err.Error()) > 1024 {
			t.Errorf("%s: a %d-byte error; it must quote a prefix of the value", name, len(err.Error()))
		}
	}
}
