package generate

import (
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// httpProtocolOptionsKey is where a cluster's upstream HTTP protocol
// options go in typed_extension_protocol_options.
const httpProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"

// upstreamProtocol is how a cluster picks the HTTP version it speaks to
// its endpoints.
type upstreamProtocol int

const (
	upstreamHTTP1      upstreamProtocol = iota // Envoy's default, no options sent
	upstreamHTTP2                              // explicit HTTP/2
	upstreamDownstream                         // the version the client spoke
	upstreamHBONE                              // HTTP/2 with HBONE's flow-control windows
)

// protocolFor is Istio's choice for a service port's clusters, outbound and
// inbound alike: HTTP/2 and gRPC ports are HTTP/2 to the upstream whatever
// the client spoke (gRPC needs HTTP/2's trailers and streams), everything
// else keeps the default.
func protocolFor(p model.Protocol) upstreamProtocol {
	switch p {
	case "HTTP2", "GRPC", "GRPC-WEB":
		return upstreamHTTP2
	}
	return upstreamHTTP1
}

// passthroughIdleTimeout is how long Istio's passthrough clusters keep an
// idle upstream connection.
const passthroughIdleTimeout = 5 * time.Minute

// setUpstreamProtocol writes the choice into the cluster's
// typed_extension_protocol_options (envoy.extensions.upstreams.http.v3):
// explicit_http_config with http2_protocol_options, or, for the
// passthrough clusters, which carry whatever a client sends to an address
// no service claims, use_downstream_protocol_config with both versions and
// a five-minute idle timeout, as Istio sends them.
func setUpstreamProtocol(c *clusterv3.Cluster, up upstreamProtocol) error {
	var o *upstreamhttpv3.HttpProtocolOptions
	switch up {
	case upstreamHTTP2, upstreamHBONE:
		h2 := &corev3.Http2ProtocolOptions{}
		if up == upstreamHBONE {
			h2.InitialStreamWindowSize = wrapperspb.UInt32(hboneStreamWindow)
			h2.InitialConnectionWindowSize = wrapperspb.UInt32(hboneConnectionWindow)
		}
		o = &upstreamhttpv3.HttpProtocolOptions{
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
				ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
					ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: h2},
				},
			},
		}
	case upstreamDownstream:
		o = &upstreamhttpv3.HttpProtocolOptions{
			CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(passthroughIdleTimeout)},
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{
				UseDownstreamProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamHttpConfig{
					HttpProtocolOptions:  &corev3.Http1ProtocolOptions{},
					Http2ProtocolOptions: &corev3.Http2ProtocolOptions{},
				},
			},
		}
	default:
		return nil
	}
	opts, err := anypb.New(o)
	if err != nil {
		return err
	}
	if c.TypedExtensionProtocolOptions == nil {
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{}
	}
	c.TypedExtensionProtocolOptions[httpProtocolOptionsKey] = opts
	return nil
}
