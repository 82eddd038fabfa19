// Package shape generates meshes to load a control plane with: the Istio and
// Kubernetes configuration (as meshperf's config.Resources, which meshperf
// apply and pilot's config directory accept as YAML) and the pods that would
// run in it, as the simulated proxies that stand in for them. Generation is
// deterministic: the same options and seed give the same mesh.
//
// shape imports sim only for ProxySpec, the description of a pod's proxy that
// sim turns into an ADS node; sim, the lower layer, knows nothing of
// configuration.
package shape

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Mesh is a generated mesh.
type Mesh struct {
	// Resources are the mesh's own configuration: namespaces, services,
	// gateways, routing.
	Resources []*config.Resource
	// Extra are resources added only to load the control plane (the book
	// lab's 600); All returns both.
	Extra []*config.Resource
	// Proxies are the pods with a proxy, one ProxySpec each.
	Proxies []sim.ProxySpec
}

// All returns Resources followed by Extra.
func (m *Mesh) All() []*config.Resource {
	return append(append(make([]*config.Resource, 0, len(m.Resources)+len(m.Extra)), m.Resources...), m.Extra...)
}

// Count returns how many of m.All() are of kind k.
func (m *Mesh) Count(k config.Kind) int {
	n := 0
	for _, r := range m.All() {
		if r.Kind == k {
			n++
		}
	}
	return n
}

// YAML renders resources as one multi-document YAML stream, the form meshperf
// apply -f and a --configDir file take.
func YAML(resources []*config.Resource) ([]byte, error) {
	var b bytes.Buffer
	for _, r := range resources {
		y, err := config.EncodeYAML(r)
		if err != nil {
			return nil, fmt.Errorf("rendering %s: %w", r.Key(), err)
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

// DefaultFirstIP is where pod addresses start unless told otherwise.
var DefaultFirstIP = netip.MustParseAddr("10.0.0.1")

// ipAllocator hands out unique IPv4 addresses in order, skipping those ending
// in .0 and .255 so that no address looks like a network or broadcast one.
type ipAllocator struct{ next netip.Addr }

func newIPAllocator(first netip.Addr) (*ipAllocator, error) {
	if !first.IsValid() {
		first = DefaultFirstIP
	}
	if !first.Is4() {
		return nil, fmt.Errorf("first pod IP %s: only IPv4 is supported", first)
	}
	return &ipAllocator{next: first}, nil
}

func (a *ipAllocator) take() (string, error) {
	for {
		ip := a.next
		if !ip.IsValid() || !ip.Is4() {
			return "", fmt.Errorf("pod addresses ran out of IPv4 space")
		}
		a.next = ip.Next()
		if b := ip.As4(); b[3] != 0 && b[3] != 255 {
			return ip.String(), nil
		}
	}
}

// podNamer names pods as a Deployment's do, DEPLOYMENT-HASH-SUFFIX, with
// Kubernetes' alphabet of safe characters, from a seeded source.
type podNamer struct {
	rng    *rand.Rand
	hashes map[string]string // deployment -> its ReplicaSet hash
}

const safeChars = "bcdfghjklmnpqrstvwxz2456789"

func newPodNamer(seed uint64) *podNamer {
	return &podNamer{rng: rand.New(rand.NewPCG(seed, 0x6d657368)), hashes: map[string]string{}}
}

func (n *podNamer) random(k int) string {
	b := make([]byte, k)
	for i := range b {
		b[i] = safeChars[n.rng.IntN(len(safeChars))]
	}
	return string(b)
}

func (n *podNamer) pod(deployment string) string {
	h, ok := n.hashes[deployment]
	if !ok {
		h = n.random(10)
		n.hashes[deployment] = h
	}
	return deployment + "-" + h + "-" + n.random(5)
}

// pods makes replicas ProxySpecs for a Deployment.
func (g *generator) pods(ns, deployment string, replicas int, labels map[string]string, sa string, router bool) error {
	for range replicas {
		ip, err := g.ips.take()
		if err != nil {
			return err
		}
		g.mesh.Proxies = append(g.mesh.Proxies, sim.ProxySpec{
			Router: router, Name: g.names.pod(deployment), Namespace: ns, IP: ip,
			Labels: labels, ServiceAccount: sa, WorkloadName: deployment,
		})
	}
	return nil
}

// generator carries what every shape needs while it is built.
type generator struct {
	mesh  Mesh
	ips   *ipAllocator
	names *podNamer
}

func newGenerator(seed uint64, firstIP netip.Addr) (*generator, error) {
	ips, err := newIPAllocator(firstIP)
	if err != nil {
		return nil, err
	}
	return &generator{ips: ips, names: newPodNamer(seed)}, nil
}

func (g *generator) add(rs ...*config.Resource) { g.mesh.Resources = append(g.mesh.Resources, rs...) }

// check validates everything generated, so that a shape never hands out
// configuration meshperf would refuse.
func (g *generator) check() (*Mesh, error) {
	for _, r := range g.mesh.All() {
		if err := config.Validate(r); err != nil {
			return nil, fmt.Errorf("generated %s is invalid: %w", r.Key(), err)
		}
	}
	for _, p := range g.mesh.Proxies {
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("generated pod: %w", err)
		}
	}
	return &g.mesh, nil
}
