// Package xds is the control plane's ADS server. It accepts Envoy's aggregated
// discovery streams, both state of the world and delta, learns each proxy from its
// first request's node, tracks per type what the proxy watches, what was last sent
// and what it acknowledged, and sends what a Generator produces: when the proxy
// asks, and when the push pipeline calls Push. It decides neither what the
// configuration is (the Generator does) nor when to push (the pipeline does); it
// owns the wire: nonces, versions, ACK/NACK bookkeeping, one writer per stream,
// the send deadline, and istiod's xDS metrics, under istiod's names.
//
// What it accepts. A stream's first node must be a valid registration
// (model.Proxy.Validate: addresses that parse, names and labels as
// Kubernetes allows them) before any hook sees it; a stream refused, by
// that or by a hook, ends with its status and is logged with the peer and
// the code, as are requests for types the server does not serve, each at
// most once per few seconds with the count left out. What it keeps for a
// proxy that does not read or answer is bounded: one response queued in
// gRPC beyond the proxy's window, one deferred push, maxUnanswered delta
// responses per type; and no Push waits on such a proxy (stuckSend).
//
// Versions. Like istiod's push version, every version_info (system_version_info
// on delta streams) is an RFC 3339 time followed by "/" and a counter that only
// grows within the process: one per Push, shared by all the types it sends, and
// one per answered request. The time is for people reading config dumps; the
// counter makes versions unique and ordered. Delta resources carry their own
// versions, a checksum of their bytes unless the Generator supplies one.
package xds

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// The type URLs the server serves, as Envoy names them on the wire.
const (
	ClusterType  = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	EndpointType = "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"
	ListenerType = "type.googleapis.com/envoy.config.listener.v3.Listener"
	RouteType    = "type.googleapis.com/envoy.config.route.v3.RouteConfiguration"
	SecretType   = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret"
	// AddressType and AuthorizationType are the ambient mode's workload
	// discovery (WDS), which node proxies (ztunnel) subscribe to.
	AddressType       = "type.googleapis.com/istio.workload.Address"
	AuthorizationType = "type.googleapis.com/istio.security.Authorization"
)

// pushOrder is the order a push sends its types in: clusters before the endpoints
// that fill them, listeners before the routes they name. Envoy warms resources in
// this order, so sending out of order makes it wait or briefly drop traffic.
// The WDS types go to node proxies only, which watch nothing else; workloads
// before the policies they name, as istiod sends them.
var pushOrder = [...]string{ClusterType, EndpointType, ListenerType, RouteType, SecretType, AddressType, AuthorizationType}

// metricType is the short name istiod uses as the type label of its xDS metrics.
func metricType(typeURL string) string {
	switch typeURL {
	case ClusterType:
		return "cds"
	case EndpointType:
		return "eds"
	case ListenerType:
		return "lds"
	case RouteType:
		return "rds"
	case SecretType:
		return "sds"
	case AddressType:
		return "wds"
	case AuthorizationType:
		return "wads"
	}
	return ""
}

// isWildcardType says whether an empty subscription means "everything" (clusters,
// listeners and the WDS types, which ztunnel subscribes to without names)
// rather than "nothing" (endpoints, routes and secrets are always asked for by
// name).
func isWildcardType(typeURL string) bool {
	switch typeURL {
	case ClusterType, ListenerType, AddressType, AuthorizationType:
		return true
	}
	return false
}

// EnvSendTimeout is Istio's environment variable for Options.SendTimeout.
const EnvSendTimeout = "PILOT_XDS_SEND_TIMEOUT"

// DefaultSendTimeout is Istio's default for PILOT_XDS_SEND_TIMEOUT: zero, meaning
// a send waits as long as the stream lives.
const DefaultSendTimeout time.Duration = 0

// Resource is one named xDS resource, already encoded.
type Resource struct {
	Name string
	// Body is sent as is to every proxy it is given to. The server never
	// re-encodes it, so a generator can build a Sidecar scope's config once and
	// hand the same Body to every proxy that shares the scope; with
	// ServerOption every send even references Body.Value's bytes rather than
	// copying them. So Body, and the array behind its Value, must never change
	// once returned: the transport may still be writing them after Push
	// returned. A changed resource is a new Body.
	Body *anypb.Any
	// Version identifies Body's content for delta xDS. Empty means the server
	// derives one from Body's bytes on every send, which a generator that caches
	// Bodies can save it from doing.
	Version string
}

// Resources is what a Generator produced for one type.
type Resources []Resource

// ErrUnchanged is what a Generator returns when a push changed nothing for this
// proxy and type: the server sends nothing for the type.
var ErrUnchanged = errors.New("xds: unchanged")

// Generator produces a proxy's configuration for one type.
type Generator interface {
	// Generate returns the complete current set of resources of typeURL for p:
	// those named in names, or all of them when names is empty (clusters and
	// listeners). The server works out deltas itself, so a partial set would
	// read as removals on delta streams.
	//
	// req is the push being carried out, or nil when the proxy itself asked (its
	// first request for the type, or new names). ErrUnchanged is for pushes only:
	// a proxy that asked must get an answer.
	Generate(p *model.Proxy, typeURL string, names []string, req *model.PushRequest) (Resources, error)
}

// ConnectionHooks is told when proxies connect and disconnect; the registry uses
// it to register workloads from node metadata.
type ConnectionHooks interface {
	// OnConnect runs once per stream, after the node is parsed and before
	// anything is sent. An error rejects the stream, with the error's message as
	// the gRPC status message (its code too, if it is a gRPC status).
	OnConnect(*Connection) error
	// OnDisconnect runs once for every connection that OnConnect accepted.
	OnDisconnect(*Connection)
}

// PushHook lets the push pipeline track connections, so that it can queue an
// initial push or later changed pushes for them through Server.Push.
type PushHook interface {
	// ConnectionAdded runs when a connection can take pushes: after OnConnect
	// and before the first response, so no push built after it is missed.
	ConnectionAdded(*Connection)
	// ConnectionRemoved runs when the stream has ended; Push to it fails.
	ConnectionRemoved(*Connection)
	// PushSent runs on the stream's goroutine when a push's sends all
	// returned without error, at, whether or not Push still waited for it
	// (a deferred push, or one whose caller gave up): convergence is
	// recorded here, so that a slow proxy's counts too.
	PushSent(c *Connection, req *model.PushRequest, at time.Time)
}

// Options tunes the server.
type Options struct {
	// SendTimeout bounds each send on a stream (PILOT_XDS_SEND_TIMEOUT). A send
	// that hits it counts pilot_xds_write_timeout and ends the stream, so a proxy
	// that stopped reading holds a push no longer than this. Zero, Istio's
	// default, means no bound; Push's context still bounds the caller's wait.
	SendTimeout time.Duration
	// Admit, when set, is called for every new stream before its first request
	// is read; an error rejects the stream with ResourceExhausted. The pipeline
	// passes its new-stream rate limiter (PILOT_MAX_REQUESTS_PER_SECOND) here.
	Admit func(ctx context.Context) error
	// Authenticate, when set, says who a new stream's caller is, from its
	// credential (a bearer token in the gRPC metadata), before OnConnect;
	// nil with no error is a stream that carried none. An error refuses
	// the stream, with its code if it is a gRPC status. The caller is kept
	// on the Connection for the hooks to check the node against.
	Authenticate func(ctx context.Context) (*ca.Caller, error)
	// Logger receives the server's logs; nil discards them.
	Logger *slog.Logger
}
