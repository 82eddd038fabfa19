package discovery

import (
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/excerpt"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// PushStatus describes the latest push, for /debug/push_status.
type PushStatus struct {
	Pushes        int64                       `json:"pushes"`
	Version       string                      `json:"version"`
	Time          time.Time                   `json:"time"`
	Full          bool                        `json:"full"`
	Reasons       map[model.TriggerReason]int `json:"reasons"`
	ConfigsCount  int                         `json:"configsUpdated"`
	Proxies       int                         `json:"proxiesQueued"`
	SkippedTotal  int64                       `json:"proxiesSkippedTotal"` // by the dependency filter, since start
	Services      int                         `json:"services"`
	SnapshotBuilt time.Time                   `json:"snapshotBuilt"`
}

func (s *Server) recordPush(req *model.PushRequest, snap *snapshot.Snapshot, proxies int) {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	s.status.Pushes = s.pushes.Load()
	s.status.Version = snap.Version
	s.status.Time = time.Now()
	s.status.Full = req.Full
	s.status.Reasons = maps.Clone(req.Reason)
	s.status.ConfigsCount = len(req.ConfigsUpdated)
	s.status.Proxies = proxies
	s.status.Services = len(snap.Registry.Services)
	s.status.SnapshotBuilt = snap.Built
}

func (s *Server) countSkipped(n int) {
	s.statusMu.Lock()
	s.status.SkippedTotal += int64(n)
	s.statusMu.Unlock()
}

// PushStatus returns the latest push's description.
func (s *Server) PushStatus() PushStatus {
	s.statusMu.Lock()
	defer s.statusMu.Unlock()
	st := s.status
	st.Reasons = maps.Clone(st.Reasons)
	return st
}

// Connections lists the connected proxies' xDS connections.
func (s *Server) Connections() []*xds.Connection {
	conns := s.xds.Connections()
	sort.Slice(conns, func(i, j int) bool { return conns[i].ID() < conns[j].ID() })
	return conns
}

// ErrUnknownProxy is returned for a proxy id with no connection.
var ErrUnknownProxy = errors.New("unknown proxy")

// ConfigDump is a proxy's current configuration in the shape of Envoy's config
// dump (its size is what operators compare), generated from the current
// snapshot for what the proxy watches. Private keys are not included.
func (s *Server) ConfigDump(proxyID string) (*adminv3.ConfigDump, error) {
	var conn *xds.Connection
	for _, c := range s.xds.Connections() {
		if c.Proxy().ID == proxyID {
			conn = c
		}
	}
	if conn == nil {
		return nil, fmt.Errorf("%w %q", ErrUnknownProxy, excerpt.Value(proxyID))
	}
	if conn.Proxy().Type == model.Ztunnel {
		return nil, fmt.Errorf("proxy %q is a node proxy (ztunnel): it is sent workload discovery, not Envoy configuration, so it has no config dump", excerpt.Value(proxyID))
	}
	watched := map[string][]string{}
	for _, ts := range conn.SyncStatus() {
		watched[ts.TypeURL] = ts.Names
	}
	snap := s.current.Load()
	p := conn.Proxy()
	gen := func(typeURL string) ([]snapshot.Resource, error) {
		if typeURL == snapshot.SecretType && s.refusesSDS(p) {
			return nil, nil // the proxy was sent none
		}
		return snap.Generate(p, typeURL, watched[typeURL])
	}
	dump := &adminv3.ConfigDump{}
	clusters, err := gen(snapshot.ClusterType)
	if err != nil {
		return nil, err
	}
	cd := &adminv3.ClustersConfigDump{VersionInfo: snap.Version}
	for _, r := range clusters {
		cd.DynamicActiveClusters = append(cd.DynamicActiveClusters, &adminv3.ClustersConfigDump_DynamicCluster{VersionInfo: snap.Version, Cluster: r.Body})
	}
	listeners, err := gen(snapshot.ListenerType)
	if err != nil {
		return nil, err
	}
	ld := &adminv3.ListenersConfigDump{VersionInfo: snap.Version}
	for _, r := range listeners {
		ld.DynamicListeners = append(ld.DynamicListeners, &adminv3.ListenersConfigDump_DynamicListener{
			Name: r.Name, ActiveState: &adminv3.ListenersConfigDump_DynamicListenerState{VersionInfo: snap.Version, Listener: r.Body},
		})
	}
	routes, err := gen(snapshot.RouteType)
	if err != nil {
		return nil, err
	}
	rd := &adminv3.RoutesConfigDump{}
	for _, r := range routes {
		rd.DynamicRouteConfigs = append(rd.DynamicRouteConfigs, &adminv3.RoutesConfigDump_DynamicRouteConfig{VersionInfo: snap.Version, RouteConfig: r.Body})
	}
	endpoints, err := gen(snapshot.EndpointType)
	if err != nil {
		return nil, err
	}
	ed := &adminv3.EndpointsConfigDump{}
	for _, r := range endpoints {
		ed.DynamicEndpointConfigs = append(ed.DynamicEndpointConfigs, &adminv3.EndpointsConfigDump_DynamicEndpointConfig{VersionInfo: snap.Version, EndpointConfig: r.Body})
	}
	secrets, err := gen(snapshot.SecretType)
	if err != nil {
		return nil, err
	}
	sd := &adminv3.SecretsConfigDump{}
	for _, r := range secrets {
		redacted, err := redactSecret(r.Body)
		if err != nil {
			return nil, err
		}
		sd.DynamicActiveSecrets = append(sd.DynamicActiveSecrets, &adminv3.SecretsConfigDump_DynamicSecret{Name: r.Name, VersionInfo: snap.Version, Secret: redacted})
	}
	for _, part := range []proto.Message{cd, ld, rd, ed, sd} {
		a, err := anypb.New(part)
		if err != nil {
			return nil, err
		}
		dump.Configs = append(dump.Configs, a)
	}
	return dump, nil
}

// redactSecret drops the private key from a secret, as Envoy's admin does.
func redactSecret(body *anypb.Any) (*anypb.Any, error) {
	var sec tlsv3.Secret
	if err := body.UnmarshalTo(&sec); err != nil {
		return nil, err
	}
	if tc := sec.GetTlsCertificate(); tc != nil {
		tc.PrivateKey = nil
	}
	return anypb.New(&sec)
}
