// Package topology reads service graphs written in isotope's format (the
// YAML topologies of istio/tools' isotope, which Istio's large load test
// runs): services that call each other, sleep, fail at a given rate and
// answer with a given size. It reads them as isotope's own code does, with
// isotope's units and defaults, so that isotope's files run unchanged, but
// strictly: keys isotope would silently drop are reported, and what
// isotope's code gets wrong (a division by zero for error rates below
// 0.01%) is not carried over.
//
// A Topology is what `meshperf topology validate` checks, what `meshperf
// service` plays one service of, and what the lab stands up as pods.
package topology

import "time"

// Protocol is a service's declared type. isotope's service speaks HTTP/1.1
// whatever the type; the type names the Service port's protocol.
type Protocol string

// The types a service may declare.
const (
	HTTP Protocol = "http"
	GRPC Protocol = "grpc"
)

// ServicePort is where every service listens, as in isotope.
const ServicePort = 8080

// Topology is a service graph.
type Topology struct {
	// Name is the graph's name: the file's base name without .yaml, or
	// the shipped topology's name.
	Name string
	// Defaults are the file's `defaults`, with isotope's built-in ones
	// under them; already applied to every service below.
	Defaults Defaults
	// Services in file order; each has every default applied.
	Services []Service
	// Ignored are keys the file sets that isotope's code ignores
	// (apiVersion, kind, numRbacPolicies, computeUsage, memoryUsage), as
	// "defaults.numRbacPolicies": valid, but a reader should know they
	// have no effect.
	Ignored []string
}

// Defaults are the values a service or call takes when it does not set
// its own.
type Defaults struct {
	Type         Protocol
	NumReplicas  int
	ErrorRate    float64 // fraction, 0..1
	ResponseSize int64   // bytes
	RequestSize  int64   // bytes of every call's body that sets no size
	Script       Script
}

// Service is one service of the graph.
type Service struct {
	Name         string
	Namespace    string // "" when the file sets none
	Cluster      string // "" when the file sets none
	Type         Protocol
	NumReplicas  int
	IsEntrypoint bool
	// ErrorRate is the fraction of requests answered 500 before the
	// script runs, 0..1.
	ErrorRate    float64
	ResponseSize int64 // bytes of every successful answer's body
	Script       Script
	Labels       map[string]string
}

// Script is what a service does on every request, step by step.
type Script []Step

// Step is one step of a script: exactly one of Sleep, Call and Concurrent
// is set. Concurrent steps are each a Sleep or a Call, never Concurrent
// (isotope allows one level).
type Step struct {
	Sleep      time.Duration // a sleep step when Call and Concurrent are nil (may be 0)
	Call       *Call
	Concurrent []Step
}

// Call is a request to another service.
type Call struct {
	// Service names the service called; it is defined in the topology.
	Service string
	// Hostname is the host:port dialled, "<service>:8080" unless the
	// file sets one.
	Hostname string
	// ExtraHeader are headers added to the request.
	ExtraHeader map[string]string
	// Size is the request body's size in bytes.
	Size int64
	// Probability is the percentage of requests that make the call,
	// 1..100; 0 (unset) means every request.
	Probability int
}

// Entrypoints are the services marked isEntrypoint, in file order.
func (t *Topology) Entrypoints() []Service {
	var out []Service
	for _, s := range t.Services {
		if s.IsEntrypoint {
			out = append(out, s)
		}
	}
	return out
}

// Pods is how many pods the graph needs: one per replica.
func (t *Topology) Pods() int {
	n := 0
	for _, s := range t.Services {
		n += s.NumReplicas
	}
	return n
}

// Service returns the named service.
func (t *Topology) Service(name string) (Service, bool) {
	for _, s := range t.Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// Hops is how many pod-to-pod hops the longest chain of calls from a
// client through entry crosses, the client's own hop to entry counted: 1
// for a service that calls nothing, 5 for a chain of five. Concurrent calls
// count once (they overlap); calls made with a probability count, as the
// path exists. The graph is acyclic (Validate refuses cycles).
func (t *Topology) Hops(entry string) int {
	depth := map[string]int{}
	var walk func(name string) int
	walk = func(name string) int {
		if d, ok := depth[name]; ok {
			return d
		}
		depth[name] = 1 // a cycle, refused by Validate, cannot recurse forever
		s, _ := t.Service(name)
		deepest := 0
		var visit func(steps []Step)
		visit = func(steps []Step) {
			for _, st := range steps {
				if st.Call != nil {
					deepest = max(deepest, walk(st.Call.Service))
				}
				visit(st.Concurrent)
			}
		}
		visit(s.Script)
		depth[name] = 1 + deepest
		return depth[name]
	}
	return walk(entry)
}
