package model

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/meshperf/meshperf/internal/excerpt"
)

// ProxyType is the kind of Envoy node, the first field of an Istio node id.
type ProxyType string

// Istio's proxy types.
const (
	Sidecar ProxyType = "sidecar"
	Router  ProxyType = "router" // a gateway
	// Ztunnel is a node proxy of the ambient mode (ztunnel, or meshperf-proxy
	// with --proxy-type ztunnel): it serves the pods of its node and is not a
	// workload itself, so it is never registered as one.
	Ztunnel ProxyType = "ztunnel"
	// Waypoint is an ambient mode's L7 proxy, an Envoy deployed for a
	// waypoint Gateway.
	Waypoint ProxyType = "waypoint"
)

// Proxy is a connected data-plane node, as its xDS node id and metadata describe
// it.
type Proxy struct {
	ID             string // the whole node id
	Type           ProxyType
	IPAddresses    []string // INSTANCE_IPS, else the id's IP
	PodName        string   // POD from POD.NS in the id
	Namespace      string   // NAMESPACE, else NS from the id
	DNSDomain      string   // the id's last field, e.g. ns.svc.cluster.local
	Labels         map[string]string
	ServiceAccount string
	WorkloadName   string
	IstioVersion   string // ISTIO_VERSION, for the pilot_xds gauge's version label
	// Authenticated is set once the control plane has verified the
	// stream's credential and found it names this proxy's namespace and
	// service account: only then is the identity more than a claim.
	Authenticated bool
}

// ParseNodeID reads an Istio node id, TYPE~IP~POD.NAMESPACE~NAMESPACE.svc.DOMAIN,
// into a Proxy and checks its fields; metadata fills the rest later, and
// Validate then checks the whole. The IP may be empty (istiod then takes the
// proxy's addresses from INSTANCE_IPS alone); the pod name may hold dots, the
// namespace cannot, so POD.NAMESPACE is split at its last dot.
func ParseNodeID(id string) (*Proxy, error) {
	parts := strings.Split(id, "~")
	if len(parts) != 4 {
		return nil, fmt.Errorf("node id %s: want TYPE~IP~POD.NAMESPACE~DOMAIN", excerpt.Quote(id))
	}
	p := &Proxy{ID: id, Type: ProxyType(parts[0]), DNSDomain: parts[3]}
	if err := p.validateType(); err != nil {
		return nil, fmt.Errorf("node id %s: %w", excerpt.Quote(id), err)
	}
	if parts[1] != "" {
		if err := validateIP(parts[1]); err != nil {
			return nil, fmt.Errorf("node id %s: %w", excerpt.Quote(id), err)
		}
		p.IPAddresses = []string{parts[1]}
	}
	dot := strings.LastIndexByte(parts[2], '.')
	if dot <= 0 || dot == len(parts[2])-1 {
		return nil, fmt.Errorf("node id %s: want POD.NAMESPACE in the third field", excerpt.Quote(id))
	}
	p.PodName, p.Namespace = parts[2][:dot], parts[2][dot+1:]
	for _, check := range []func() error{p.validatePodName, p.validateNamespace, p.validateDNSDomain} {
		if err := check(); err != nil {
			return nil, fmt.Errorf("node id %s: %w", excerpt.Quote(id), err)
		}
	}
	return p, nil
}

// Validate says whether p is a registration the control plane may act on,
// as istiod checks a node before it accepts the stream: every address an IP
// (and at least one), names as Kubernetes allows them, labels as Kubernetes
// allows them. A proxy's addresses and labels become endpoints in other
// proxies' EDS and workloads in node proxies' WDS, and Envoy rejects a whole
// response for one malformed address, so one bad registration accepted would
// break a service for every client of it. Errors quote at most a prefix of
// the offending value (excerpt), since a client can send megabytes of it.
func (p *Proxy) Validate() error {
	checks := []func() error{p.validateType, p.validateIPs, p.validatePodName, p.validateNamespace,
		p.validateDNSDomain, p.validateServiceAccount, p.validateWorkloadName, p.validateLabels}
	for _, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("node %s: %w", excerpt.Quote(p.ID), err)
		}
	}
	return nil
}

func (p *Proxy) validateType() error {
	switch p.Type {
	case Sidecar, Router, Ztunnel, Waypoint:
		return nil
	}
	return fmt.Errorf("type %s is not one of sidecar, router, ztunnel, waypoint", excerpt.Quote(string(p.Type)))
}

func (p *Proxy) validateIPs() error {
	if len(p.IPAddresses) == 0 {
		return errors.New("no IP address in the node id or in metadata INSTANCE_IPS")
	}
	for _, ip := range p.IPAddresses {
		if err := validateIP(ip); err != nil {
			return err
		}
	}
	return nil
}

// validateIP accepts what Envoy's address parsing accepts: an IPv4 or IPv6
// address without a zone.
func validateIP(ip string) error {
	a, err := netip.ParseAddr(ip)
	if err != nil || a.Zone() != "" {
		return fmt.Errorf("IP %s is not an IP address", excerpt.Quote(ip))
	}
	return nil
}

func (p *Proxy) validatePodName() error {
	return dnsName("pod name", p.PodName, validation.IsDNS1123Subdomain, dns1123Subdomain)
}

func (p *Proxy) validateNamespace() error {
	return dnsName("namespace", p.Namespace, validation.IsDNS1123Label, dns1123Label)
}

func (p *Proxy) validateDNSDomain() error {
	return dnsName("DNS domain", p.DNSDomain, validation.IsDNS1123Subdomain, dns1123Subdomain)
}

// validateServiceAccount allows none: a proxy that names no service account
// claims no identity.
func (p *Proxy) validateServiceAccount() error {
	if p.ServiceAccount == "" {
		return nil
	}
	return dnsName("service account", p.ServiceAccount, validation.IsDNS1123Subdomain, dns1123Subdomain)
}

// validateWorkloadName allows none; a name is a Kubernetes object's (a
// Deployment's, a pod's).
func (p *Proxy) validateWorkloadName() error {
	if p.WorkloadName == "" {
		return nil
	}
	return dnsName("workload name", p.WorkloadName, validation.IsDNS1123Subdomain, dns1123Subdomain)
}

func (p *Proxy) validateLabels() error {
	keys := make([]string, 0, len(p.Labels))
	for k := range p.Labels {
		keys = append(keys, k)
	}
	sort.Strings(keys) // the same label reported first every time
	for _, k := range keys {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("label key %s is not a Kubernetes label key: %s", excerpt.Quote(k), strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(p.Labels[k]); len(msgs) > 0 {
			return fmt.Errorf("label %s: value %s is not a Kubernetes label value: %s", k, excerpt.Quote(p.Labels[k]), strings.Join(msgs, "; "))
		}
	}
	return nil
}

// The rules the DNS checks quote, shorter than apimachinery's messages.
const (
	dns1123Label     = "a DNS-1123 label: lowercase letters, digits and '-', at most 63"
	dns1123Subdomain = "a DNS-1123 subdomain: lowercase letters, digits, '-' and '.', at most 253"
)

func dnsName(what, value string, check func(string) []string, rule string) error {
	if len(check(value)) > 0 {
		return fmt.Errorf("%s %s is not %s", what, excerpt.Quote(value), rule)
	}
	return nil
}
