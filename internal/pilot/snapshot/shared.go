package snapshot

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/pilot/generate"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/scope"
)

// What every scope's outbound config is made of, shared between scopes.
// A service's outbound clusters depend only on the service and the
// DestinationRules applied to its host, not on the scope that imports it, so
// they are generated and encoded once per snapshot for every scope that
// imports the service under the same rules (istiod's CDS cache keys clusters
// the same way). Every namespace has its own default scope, so before this a
// mesh of N namespaces importing each other generated and encoded N copies
// of every cluster on each push: measured at 100 namespaces, 10,100 clusters
// and 41% of the control plane's CPU per push, instead of 101. Routes are
// still one configuration per scope, but made of shared virtual hosts.

// clusterKey identifies a service's clusters within one snapshot: the
// registry's service (one pointer per snapshot) and the keys of the rules
// merged for its host, in the scope's order, which decides the merge.
type clusterKey struct {
	svc   *model.Service
	rules string
}

// sharedClusters is one service's encoded clusters (or the clusters every
// sidecar gets: BlackHole, Passthrough; or the inbound config of one set of
// ports), made on first use.
type sharedClusters struct {
	once      sync.Once
	err       error
	resources []Resource
}

// outboundClusters are a scope's outbound clusters, in generate.OutboundClusters'
// order, each service's shared with every scope importing it under the same
// rules. The slice is the caller's; the Resources are shared.
func (s *Snapshot) outboundClusters(sc *scope.SidecarScope, services []*model.Service) ([]Resource, error) {
	fixed, err := s.fixedOutboundClusters()
	if err != nil {
		return nil, err
	}
	out := append([]Resource(nil), fixed...)
	drs := s.destinationRules(sc)
	for _, svc := range services {
		rules := sc.DestinationRules(svc.Hostname)
		key := clusterKey{svc: svc}
		if len(rules) > 0 {
			names := make([]string, len(rules))
			for i, r := range rules {
				names[i] = r.Key().String()
			}
			key.rules = strings.Join(names, "\x00")
		}
		shared := entryOf(&s.mu, s.clusters, key)
		shared.once.Do(func() {
			clusters, err := generate.ServiceClusters(svc, drs(svc.Hostname))
			if err == nil {
				shared.resources, err = encodeNamed(clusters)
			}
			shared.err = err
		})
		if shared.err != nil {
			return nil, shared.err
		}
		out = append(out, shared.resources...)
	}
	return out, nil
}

func (s *Snapshot) fixedOutboundClusters() ([]Resource, error) {
	s.fixed.once.Do(func() {
		clusters, err := generate.FixedOutboundClusters()
		if err == nil {
			s.fixed.resources, err = encodeNamed(clusters)
		}
		s.fixed.err = err
	})
	return s.fixed.resources, s.fixed.err
}

// outboundListeners are a scope's outbound listeners, in
// generate.OutboundListeners' order, each made and encoded once per snapshot
// for every scope that has it: a listener depends only on its port, and a
// TCP one on its service, so scopes importing the same services share
// them as they share clusters (at 100 namespaces, one push made 100 copies
// of each HTTP port's listener: 10% of its allocations).
func (s *Snapshot) outboundListeners(services []*model.Service, registryOnly bool) ([]Resource, error) {
	keys := generate.OutboundListenerKeys(services, registryOnly)
	out := make([]Resource, 0, len(keys))
	for _, k := range keys {
		shared := entryOf(&s.mu, s.listeners, k)
		shared.once.Do(func() {
			l, err := k.Listener()
			if err == nil {
				shared.resource, err = encode(l.Name, l)
			}
			shared.err = err
		})
		if shared.err != nil {
			return nil, shared.err
		}
		out = append(out, shared.resource)
	}
	return out, nil
}

// sharedListener is one outbound listener, encoded on first use.
type sharedListener struct {
	once     sync.Once
	err      error
	resource Resource
}

// A sidecar's inbound clusters and listener depend only on its workload's
// ports, their protocols and mTLS modes, so the proxies of a snapshot with
// the same ports share one encoding of them, as they share outbound
// clusters: replicas of a service, and in bench pilot's mesh every proxy
// (measured there: 11% of the generation's CPU when each proxy had its own).

// The kinds of inbound config, the first byte of an inboundKey.
const (
	inboundClustersKind = 'c'
	inboundListenerKind = 'l'
)

// inboundKey identifies the inbound config of one kind made from ports.
func inboundKey(kind byte, ports []generate.InboundPort) string {
	b := []byte{kind}
	for _, p := range ports {
		b = strconv.AppendUint(b, uint64(p.Port), 10)
		b = append(b, '/')
		b = append(b, p.Protocol...)
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.MTLS), 10)
		b = append(b, ',')
	}
	return string(b)
}

// sharedInbound returns the inbound config cached under key, generating it
// on first use.
func (s *Snapshot) sharedInbound(key string, generate func() ([]Resource, error)) ([]Resource, error) {
	shared := entryOf(&s.mu, s.inbound, key)
	shared.once.Do(func() { shared.resources, shared.err = generate() })
	return shared.resources, shared.err
}

// sharedVirtualHost is one service's outbound virtual host, made on first
// use and shared by every scope's route configuration that has it: like a
// cluster, it differs between namespaces only for the services of the
// proxy's own namespace (their short names), so N namespaces' routes are
// made of about N+S hosts rather than N×S.
type sharedVirtualHost struct {
	once sync.Once
	err  error
	host *routev3.VirtualHost

	encodeOnce sync.Once
	encodeErr  error
	encoded    []byte
}

// virtualHost is generate.RouteInput.VirtualHosts for this snapshot.
func (s *Snapshot) virtualHost(key generate.VirtualHostKey, build func() (*routev3.VirtualHost, error)) (*routev3.VirtualHost, error) {
	shared := entryOf(&s.mu, s.virtualHosts, key)
	shared.once.Do(func() {
		shared.host, shared.err = build()
		if shared.err == nil {
			s.mu.Lock()
			s.virtualHostOf[shared.host] = shared
			s.mu.Unlock()
		}
	})
	return shared.host, shared.err
}

// encodeRoutes encodes a route configuration whose virtual hosts came from
// virtualHost: each shared host's bytes are made once per snapshot and
// spliced in, so a scope pays for its own few bytes rather than for
// re-encoding every service's host (with 100 namespaces, encoding the route
// configurations was 0.5 s of a churn run's 0.7 s of outbound generation).
// The result is the bytes proto.Marshal makes (deterministic): the
// configuration's fields in number order, its name (1) before its virtual
// hosts (2) before the rest. rc is the caller's own: it is changed while
// encoding and put back.
func (s *Snapshot) encodeRoutes(rc *routev3.RouteConfiguration) (Resource, error) {
	opts := proto.MarshalOptions{Deterministic: true}
	head, err := opts.Marshal(&routev3.RouteConfiguration{Name: rc.Name})
	if err != nil {
		return Resource{}, fmt.Errorf("encoding %s: %w", rc.Name, err)
	}
	tail, err := opts.Marshal(routeConfigTail(rc))
	if err != nil {
		return Resource{}, fmt.Errorf("encoding %s: %w", rc.Name, err)
	}
	// The hosts' bytes first, to size the value once: growing it by
	// appending copied each scope's routes over and over (half of a push's
	// allocated bytes at 100 namespaces).
	hosts := make([][]byte, len(rc.VirtualHosts))
	size := len(head) + len(tail)
	for i, vh := range rc.VirtualHosts {
		if hosts[i], err = s.virtualHostBytes(vh); err != nil {
			return Resource{}, fmt.Errorf("encoding %s: %w", rc.Name, err)
		}
		size += protowire.SizeTag(routeVirtualHostsField) + protowire.SizeBytes(len(hosts[i]))
	}
	value := append(make([]byte, 0, size), head...)
	for _, b := range hosts {
		value = protowire.AppendTag(value, routeVirtualHostsField, protowire.BytesType)
		value = protowire.AppendBytes(value, b)
	}
	value = append(value, tail...)
	return Resource{Name: rc.Name, Body: &anypb.Any{TypeUrl: RouteType, Value: value}}, nil
}

// routeConfigTail is rc without its name and virtual hosts: the fields
// encodeRoutes appends after the spliced hosts. Cloned without the hosts,
// which are most of rc and already encoded: cloning rc whole and dropping
// them after deep-copied every host of every scope on each push (17% of the
// control plane's CPU in bench pilot at 100 namespaces).
func routeConfigTail(rc *routev3.RouteConfiguration) *routev3.RouteConfiguration {
	hosts := rc.VirtualHosts
	rc.VirtualHosts = nil
	rest := proto.Clone(rc).(*routev3.RouteConfiguration)
	rc.VirtualHosts = hosts
	rest.Name = ""
	return rest
}

// routeVirtualHostsField is RouteConfiguration.virtual_hosts' number.
const routeVirtualHostsField = 2

// virtualHostBytes is vh encoded: once per snapshot for a shared host,
// each time for another (the catch-all).
func (s *Snapshot) virtualHostBytes(vh *routev3.VirtualHost) ([]byte, error) {
	s.mu.Lock()
	shared := s.virtualHostOf[vh]
	s.mu.Unlock()
	if shared == nil {
		return proto.MarshalOptions{Deterministic: true}.Marshal(vh)
	}
	shared.encodeOnce.Do(func() {
		shared.encoded, shared.encodeErr = proto.MarshalOptions{Deterministic: true}.Marshal(vh)
	})
	return shared.encoded, shared.encodeErr
}

// entryOf returns m's entry for key, adding an empty one under mu if it has
// none: the entry is then filled once, outside mu, by whichever proxy's push
// needs it first, while the others wait on its sync.Once.
func entryOf[K comparable, V any](mu *sync.Mutex, m map[K]*V, key K) *V {
	mu.Lock()
	defer mu.Unlock()
	e, ok := m[key]
	if !ok {
		e = new(V)
		m[key] = e
	}
	return e
}
