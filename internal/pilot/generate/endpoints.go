package generate

import (
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// LoadAssignment is the EDS resource of an outbound cluster: the endpoints of the
// service port, narrowed to the subset's labels when the cluster is a subset's.
// Endpoints with a sidecar carry Istio's tlsMode metadata, which auto mTLS
// matches on.
func LoadAssignment(cluster string, endpoints []*model.Endpoint, subsetLabels map[string]string) *endpointv3.ClusterLoadAssignment {
	return loadAssignment(cluster, endpoints, subsetLabels, func(ep *model.Endpoint) *endpointv3.LbEndpoint {
		var meta *corev3.Metadata
		if ep.TLSMode == tlsModeIstio {
			meta = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				transportSocketMatchFilter: {Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}},
			}}
		}
		return lbEndpoint(ep.Address, ep.Port, meta)
	})
}

// loadAssignment makes a cluster's endpoints, those with the subset's
// labels, each as lbEndpoint says.
//
// Endpoints are grouped by locality (a Kubernetes Node's region and zone),
// in the order each locality first appears, as istiod groups them, so that
// a proxy can prefer its own zone; endpoints without one share a group with
// no locality.
func loadAssignment(cluster string, endpoints []*model.Endpoint, subsetLabels map[string]string, lbEndpoint func(*model.Endpoint) *endpointv3.LbEndpoint) *endpointv3.ClusterLoadAssignment {
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	byLocality := map[string]*endpointv3.LocalityLbEndpoints{}
	for _, ep := range endpoints {
		if !hasLabels(ep.Labels, subsetLabels) {
			continue
		}
		group := byLocality[ep.Locality]
		if group == nil {
			group = &endpointv3.LocalityLbEndpoints{Locality: locality(ep.Locality)}
			byLocality[ep.Locality] = group
			cla.Endpoints = append(cla.Endpoints, group)
		}
		group.LbEndpoints = append(group.LbEndpoints, lbEndpoint(ep))
	}
	return cla
}

// locality is Envoy's form of "region/zone"; nil for none.
func locality(s string) *corev3.Locality {
	if s == "" {
		return nil
	}
	region, zone, _ := strings.Cut(s, "/")
	return &corev3.Locality{Region: region, Zone: zone}
}

func lbEndpoint(address string, port uint32, meta *corev3.Metadata) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: socketAddress(address, port),
		}},
		Metadata: meta,
	}
}

func socketAddress(address string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Address:       address,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// hasLabels says whether labels contain every one of want.
func hasLabels(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
