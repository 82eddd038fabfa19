package model

import (
	"strings"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Protocol is a service port's protocol, by Istio's names (HTTP, HTTP2, GRPC,
// TCP, TLS, HTTPS, ...), from the port's protocol or name prefix.
type Protocol string

// ProtocolFromName reads an Istio protocol from a port name or an
// appProtocol such as "http-web", "grpc", "tcp-db" or "HTTPS", as Istio's
// protocol selection does; anything else is TCP.
func ProtocolFromName(name string) Protocol {
	prefix, _, _ := strings.Cut(strings.ToLower(name), "-")
	switch prefix {
	case "http", "http2", "grpc", "grpc-web", "https", "tls", "tcp", "mongo", "redis", "mysql":
		return Protocol(strings.ToUpper(prefix))
	case "h2c":
		return "HTTP2"
	}
	return "TCP"
}

// ServicePort is one port of a service.
type ServicePort struct {
	Name       string
	Number     uint32
	Protocol   Protocol
	TargetPort uint32 // the workload's port; 0: same as Number
}

// Resolution says how a service's endpoints are found, as a ServiceEntry says it.
type Resolution int

// Resolutions, as ServiceEntry's.
const (
	ResolveStatic Resolution = iota // endpoints are workload addresses (Services, STATIC entries)
	ResolveNone                     // pass through to the original destination
	ResolveDNS                      // the proxy resolves the hostname (or the endpoints' names)
	ResolveDNSRoundRobin
)

// Service is one hostname of the registry: a Kubernetes Service, or one host of
// a ServiceEntry.
type Service struct {
	Key          config.Key // the Service or ServiceEntry it comes from
	Hostname     string     // FQDN, or a wildcard *.example.com for ServiceEntries
	Namespace    string
	Ports        []ServicePort
	Resolution   Resolution
	MeshExternal bool
	// Selector picks the workloads behind the service (Service.spec.selector,
	// ServiceEntry.workloadSelector.labels); nil means none (endpoints are
	// inline, or there are none).
	Selector map[string]string
	// Addresses are virtual IPs (a Service's clusterIP, a ServiceEntry's
	// addresses); empty when the service has none.
	Addresses []string
	// SubjectAltNames are the identities a ServiceEntry's workloads may
	// present (its subjectAltNames).
	SubjectAltNames []string
	// Labels are the Service's or ServiceEntry's own (metadata.labels),
	// which bind it to a waypoint.
	Labels map[string]string
}

// Port returns the service's port with that number.
func (s *Service) Port(number uint32) (ServicePort, bool) {
	for _, p := range s.Ports {
		if p.Number == number {
			return p, true
		}
	}
	return ServicePort{}, false
}

// Endpoint is one address that serves a service port.
type Endpoint struct {
	Address        string
	Port           uint32 // the workload's port
	ServicePort    uint32 // the service port it serves
	Labels         map[string]string
	ServiceAccount string
	Namespace      string
	WorkloadName   string
	// TLSMode is "istio" when the workload has a sidecar (it speaks mTLS), as
	// Istio's security.istio.io/tlsMode label says.
	TLSMode string
	// Locality is "region/zone" from the workload's Kubernetes Node
	// (topology.kubernetes.io labels); empty when unknown.
	Locality string
}
