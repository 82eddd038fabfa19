package generate

import (
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// protocolOptions decodes the cluster's upstream HTTP options (nil: none).
func protocolOptions(t *testing.T, c *clusterv3.Cluster) *upstreamhttpv3.HttpProtocolOptions {
	t.Helper()
	a, ok := c.GetTypedExtensionProtocolOptions()[httpProtocolOptionsKey]
	if !ok {
		return nil
	}
	var o upstreamhttpv3.HttpProtocolOptions
	if err := a.UnmarshalTo(&o); err != nil {
		t.Fatalf("%s: %v", c.Name, err)
	}
	return &o
}

// upstreamH2 says whether the cluster asks for HTTP/2 upstream.
func upstreamH2(t *testing.T, c *clusterv3.Cluster) bool {
	return protocolOptions(t, c).GetExplicitHttpConfig().GetHttp2ProtocolOptions() != nil
}

// gRPC and HTTP/2 ports are HTTP/2 to the upstream on both sides of the
// mesh; HTTP and TCP ports keep the default.
func TestHTTP2PortsGoUpstreamAsHTTP2(t *testing.T) {
	svc := &model.Service{Hostname: "echo.lab.svc.cluster.local", Namespace: "lab", Ports: []model.ServicePort{
		{Name: "http", Number: 8080, Protocol: "HTTP"},
		{Name: "grpc", Number: 8079, Protocol: "GRPC"},
		{Name: "http2", Number: 8081, Protocol: "HTTP2"},
		{Name: "grpc-web", Number: 8082, Protocol: "GRPC-WEB"},
		{Name: "tcp", Number: 8078, Protocol: "TCP"},
	}}
	want := map[uint32]bool{8080: false, 8079: true, 8081: true, 8082: true, 8078: false}
	out, err := OutboundClusters([]*model.Service{svc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range out {
		for port, h2 := range want {
			if c.Name == ClusterName(outbound, port, "", svc.Hostname) {
				seen++
				if upstreamH2(t, c) != h2 {
					t.Errorf("%s: HTTP/2 upstream %v, want %v", c.Name, !h2, h2)
				}
			}
		}
	}
	if seen != len(want) {
		t.Fatalf("found %d of the %d outbound clusters", seen, len(want))
	}
	var ports []InboundPort
	for _, p := range svc.Ports {
		ports = append(ports, InboundPort{Port: p.Number, Protocol: p.Protocol})
	}
	in, err := InboundClusters(ports)
	if err != nil {
		t.Fatal(err)
	}
	// The passthrough clusters speak the client's version: a gRPC call to an
	// address no service claims still reaches it as HTTP/2.
	for _, c := range []*clusterv3.Cluster{out[1], in[0]} {
		o := protocolOptions(t, c).GetUseDownstreamProtocolConfig()
		if o.GetHttpProtocolOptions() == nil || o.GetHttp2ProtocolOptions() == nil {
			t.Errorf("%s: upstream protocol options %v, want the downstream's, HTTP/1.1 or HTTP/2", c.Name, protocolOptions(t, c))
		}
	}
	for _, c := range in[1:] { // after the passthrough
		port := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue()
		if upstreamH2(t, c) != want[port] {
			t.Errorf("%s: HTTP/2 upstream %v, want %v", c.Name, !want[port], want[port])
		}
	}
}
