package shape

import (
	"errors"
	"fmt"
	"net/netip"
)

// UniformOptions describe a mesh of namespaces × services × replicas, the
// shape of Istio's pilot-load cluster config.
type UniformOptions struct {
	Namespaces           int    // ns-0 .. ns-(N-1)
	ServicesPerNamespace int    // svc-0 .. svc-(M-1) in each
	Replicas             int    // pods per service
	NamespacePrefix      string // "ns-" if empty
	ServicePrefix        string // "svc-" if empty
	// Ports of every service; default one port, http 80 -> 8080.
	Ports []Port
	// PodLabels are added to every pod's labels (app=SERVICE and version=v1
	// always); NamespaceLabels to every namespace's (for discoverySelectors).
	PodLabels       map[string]string
	NamespaceLabels map[string]string
	Seed            uint64     // pod name suffixes
	FirstIP         netip.Addr // DefaultFirstIP if zero
}

// Uniform generates a namespace per Namespaces, in each ServicesPerNamespace
// Services selecting app=SERVICE, and Replicas pods per service whose service
// account is the service's name.
func Uniform(o UniformOptions) (*Mesh, error) {
	if o.Namespaces <= 0 || o.ServicesPerNamespace <= 0 || o.Replicas < 0 {
		return nil, errors.New("uniform mesh: namespaces and services per namespace must be positive, replicas not negative")
	}
	if o.NamespacePrefix == "" {
		o.NamespacePrefix = "ns-"
	}
	if o.ServicePrefix == "" {
		o.ServicePrefix = "svc-"
	}
	if len(o.Ports) == 0 {
		o.Ports = []Port{{Name: "http", Number: 80, TargetPort: 8080}}
	}
	g, err := newGenerator(o.Seed, o.FirstIP)
	if err != nil {
		return nil, fmt.Errorf("uniform mesh: %w", err)
	}
	for n := range o.Namespaces {
		ns := fmt.Sprintf("%s%d", o.NamespacePrefix, n)
		g.add(namespace(ns, o.NamespaceLabels))
		for s := range o.ServicesPerNamespace {
			name := fmt.Sprintf("%s%d", o.ServicePrefix, s)
			app := map[string]string{"app": name}
			g.add(service(ns, name, app, app, o.Ports))
			labels := merge(o.PodLabels, app, map[string]string{"version": "v1"})
			if err := g.pods(ns, name+"-v1", o.Replicas, labels, name, false); err != nil {
				return nil, fmt.Errorf("uniform mesh: %w", err)
			}
		}
	}
	m, err := g.check()
	if err != nil {
		return nil, fmt.Errorf("uniform mesh: %w", err)
	}
	return m, nil
}
