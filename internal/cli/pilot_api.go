package cli

import (
	"errors"
	"log/slog"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// apiDeps exposes the running control plane to its HTTP API.
func apiDeps(srv *discovery.Server, log *slog.Logger) api.Deps {
	d := api.Deps{
		Store:  srv.Store(),
		Writer: srv.Writer(),
		ConfigDump: func(id string) (*adminv3.ConfigDump, error) {
			dump, err := srv.ConfigDump(id)
			if errors.Is(err, discovery.ErrUnknownProxy) {
				return nil, errors.Join(api.ErrUnknownProxy, err)
			}
			return dump, err
		},
		Syncz:      func() []api.ProxySync { return syncz(srv.Connections()) },
		PushStatus: func() any { return srv.PushStatus() },
		PushTrace:  func() any { return srv.PushTraces() },
		Logger:     log,
	}
	// Not a nil *ca.TokenIssuer in the interface: on Kubernetes the API
	// must see none and say the kubelet projects tokens.
	if tokens := srv.Tokens(); tokens != nil {
		d.Tokens = tokens
	}
	return d
}

// shortType is istiod's short name of a type URL (cds, eds, lds, rds, sds).
var shortType = map[string]string{
	xds.ClusterType: "cds", xds.EndpointType: "eds", xds.ListenerType: "lds",
	xds.RouteType: "rds", xds.SecretType: "sds",
}

func syncz(conns []*xds.Connection) []api.ProxySync {
	out := make([]api.ProxySync, 0, len(conns))
	for _, c := range conns {
		ps := api.ProxySync{ProxyID: c.Proxy().ID, ConnectionID: c.ID(), ConnectedAt: c.ConnectedAt()}
		for _, t := range c.SyncStatus() {
			ps.Types = append(ps.Types, api.TypeSync{
				Type: shortType[t.TypeURL], VersionSent: t.VersionSent, NonceSent: t.NonceSent,
				VersionAcked: t.VersionAcked, NonceAcked: t.NonceAcked, Synced: t.Synced(),
				Nacks: t.Nacks, LastError: t.LastError,
			})
		}
		out = append(out, ps)
	}
	return out
}
