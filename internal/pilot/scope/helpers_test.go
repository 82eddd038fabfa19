package scope

import (
	"fmt"
	"slices"
	"strings"
	"time"

	networking "istio.io/api/networking/v1alpha3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Test fixtures: resources built directly, created at t0 plus their age
// argument in seconds, so "oldest" is explicit in every table.

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func res(kind config.Kind, ns, name string, created int, spec any) *config.Resource {
	return &config.Resource{
		Kind: kind,
		Meta: metav1.ObjectMeta{
			Namespace:         ns,
			Name:              name,
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(created) * time.Second)),
		},
		Spec: spec,
	}
}

func kubeSvc(ns, name, exportTo string, ports ...int32) *config.Resource {
	spec := &corev1.ServiceSpec{Selector: map[string]string{"app": name}}
	for _, p := range ports {
		spec.Ports = append(spec.Ports, corev1.ServicePort{Port: p})
	}
	r := res(config.KindService, ns, name, 0, spec)
	if exportTo != "" {
		r.Meta.Annotations = map[string]string{ExportToAnnotation: exportTo}
	}
	return r
}

func serviceEntry(ns, name string, hosts, exportTo []string, ports ...uint32) *config.Resource {
	spec := &networking.ServiceEntry{Hosts: hosts, ExportTo: exportTo}
	for _, p := range ports {
		spec.Ports = append(spec.Ports, &networking.ServicePort{Number: p, Name: fmt.Sprint("p", p), Protocol: "HTTP"})
	}
	return res(config.KindServiceEntry, ns, name, 0, spec)
}

func virtualService(ns, name string, hosts, gateways, exportTo []string, dests ...string) *config.Resource {
	spec := &networking.VirtualService{Hosts: hosts, Gateways: gateways, ExportTo: exportTo}
	for _, d := range dests {
		spec.Http = append(spec.Http, &networking.HTTPRoute{Route: []*networking.HTTPRouteDestination{
			{Destination: &networking.Destination{Host: d}},
		}})
	}
	return res(config.KindVirtualService, ns, name, 0, spec)
}

func destRule(ns, name, host string, exportTo ...string) *config.Resource {
	return res(config.KindDestinationRule, ns, name, 0, &networking.DestinationRule{Host: host, ExportTo: exportTo})
}

// sidecarRes builds a Sidecar; selector nil means none, egress hosts form one
// catch-all listener (none: no egress at all).
func sidecarRes(ns, name string, created int, selector map[string]string, egress ...string) *config.Resource {
	spec := &networking.Sidecar{}
	if selector != nil {
		spec.WorkloadSelector = &networking.WorkloadSelector{Labels: selector}
	}
	if len(egress) > 0 {
		spec.Egress = []*networking.IstioEgressListener{{Hosts: egress}}
	}
	return res(config.KindSidecar, ns, name, created, spec)
}

func gatewayRes(ns, name string, selector map[string]string) *config.Resource {
	return res(config.KindGateway, ns, name, 0, &networking.Gateway{Selector: selector})
}

func workloadEntry(ns, name string, labels map[string]string) *config.Resource {
	return res(config.KindWorkloadEntry, ns, name, 0, &networking.WorkloadEntry{Address: "10.0.0.1", Labels: labels})
}

func sidecarProxy(ns string, labels map[string]string) *model.Proxy {
	return &model.Proxy{Type: model.Sidecar, Namespace: ns, Labels: labels}
}

func key(kind config.Kind, ns, name string) config.Key {
	return config.Key{Kind: kind, Namespace: ns, Name: name}
}

// hostnames lists a scope's imported hostnames, sorted.
func hostnames(ss []*Service) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Hostname
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// names lists resources as ns/name, sorted.
func names(rs []*config.Resource) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Meta.Namespace + "/" + r.Meta.Name
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func host(name, ns string) string { return name + "." + ns + ".svc.cluster.local" }

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
