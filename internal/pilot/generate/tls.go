package generate

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
	networking "istio.io/api/networking/v1alpha3"
)

// SDS secret names, as Istio's: the workload's certificate and the mesh root.
const (
	WorkloadSecret = "default"
	RootSecret     = "ROOTCA"
)

// istioALPN is what Istio's proxies offer on mesh mTLS so the server side can
// tell mesh traffic from other TLS.
var istioALPN = []string{"istio-peer-exchange", "istio"}

// tlsModeMetadataKey is the endpoint metadata that auto mTLS matches: Istio sets
// envoy.transport_socket_match {tlsMode: istio} on endpoints with a sidecar.
const (
	transportSocketMatchFilter = "envoy.transport_socket_match"
	tlsModeKey                 = "tlsMode"
	tlsModeIstio               = "istio"
)

// autoMTLS is Istio's automatic mutual TLS: endpoints that have a sidecar are
// reached over ISTIO_MUTUAL, the others in plain text. A DestinationRule that
// sets a TLS mode decides instead: ISTIO_MUTUAL for every endpoint, DISABLE for
// none (other modes, which need certificates from files, are left to the proxy's
// plain text here and reported by validation).
func autoMTLS(port uint32, subset, host string, tls *networking.ClientTLSSettings) ([]*clusterv3.Cluster_TransportSocketMatch, error) {
	socket, err := upstreamMTLS(outboundSNI(port, subset, host))
	if err != nil {
		return nil, err
	}
	mtls := &clusterv3.Cluster_TransportSocketMatch{Name: "tlsMode-istio", TransportSocket: socket}
	plain := &clusterv3.Cluster_TransportSocketMatch{
		Name:            "tlsMode-disabled",
		Match:           &structpb.Struct{},
		TransportSocket: &corev3.TransportSocket{Name: "envoy.transport_sockets.raw_buffer"},
	}
	// DISABLE is the zero value of the mode, so only settings that are there
	// can say it; no settings means automatic.
	switch {
	case tls == nil:
	case tls.GetMode() == networking.ClientTLSSettings_ISTIO_MUTUAL:
		return []*clusterv3.Cluster_TransportSocketMatch{mtls}, nil
	case tls.GetMode() == networking.ClientTLSSettings_DISABLE:
		return []*clusterv3.Cluster_TransportSocketMatch{plain}, nil
	}
	mtls.Match = &structpb.Struct{Fields: map[string]*structpb.Value{tlsModeKey: structpb.NewStringValue(tlsModeIstio)}}
	return []*clusterv3.Cluster_TransportSocketMatch{mtls, plain}, nil
}

// upstreamMTLS is the client side of mesh mTLS: the workload certificate and the
// mesh root from SDS over ADS.
func upstreamMTLS(sni string) (*corev3.TransportSocket, error) {
	ctx := &tlsv3.UpstreamTlsContext{Sni: sni, CommonTlsContext: meshTLSContext(istioALPN)}
	return transportSocket(ctx)
}

// DownstreamMTLS is the server side of mesh mTLS, requiring a client
// certificate signed by the mesh root.
func DownstreamMTLS() (*corev3.TransportSocket, error) {
	ctx := &tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext:         meshTLSContext([]string{"h2", "http/1.1"}),
	}
	return transportSocket(ctx)
}

func meshTLSContext(alpn []string) *tlsv3.CommonTlsContext {
	return &tlsv3.CommonTlsContext{
		AlpnProtocols: alpn,
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{
			{Name: WorkloadSecret, SdsConfig: adsConfigSource()},
		},
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContextSdsSecretConfig{
			ValidationContextSdsSecretConfig: &tlsv3.SdsSecretConfig{Name: RootSecret, SdsConfig: adsConfigSource()},
		},
	}
}

func transportSocket(ctx proto.Message) (*corev3.TransportSocket, error) {
	a, err := anypb.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("encoding a TLS context: %w", err)
	}
	return &corev3.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: a},
	}, nil
}
