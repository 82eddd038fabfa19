package discovery

import (
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// generator serves the xDS server from the current snapshot.
type generator struct{ s *Server }

func (g generator) Generate(p *model.Proxy, typeURL string, names []string, req *model.PushRequest) (xds.Resources, error) {
	if typeURL == snapshot.SecretType && g.s.refusesSDS(p) {
		if req != nil {
			// Refused when asked; a push has nothing new to send.
			return nil, xds.ErrUnchanged
		}
		g.s.sdsRefused.Inc()
		g.s.scopeLog(ScopeADS).Warn("SDS refused: the proxy did not prove its identity; it gets its certificate from the CA (the TLS port's CreateCertificate) with its token, or sends the token on xDS",
			"proxy", p.ID, "names", names)
		// An empty answer, as istiod gives a proxy it has not authenticated,
		// the mesh root included (it reaches sidecars with their
		// certificate): nothing to NACK, and the proxy does not wait.
		return xds.Resources{}, nil
	}
	rs, err := g.s.current.Load().Generate(p, typeURL, names)
	if err != nil {
		return nil, err
	}
	return toXDS(rs), nil
}

func toXDS(rs []snapshot.Resource) xds.Resources {
	out := make(xds.Resources, len(rs))
	for i, r := range rs {
		out[i] = xds.Resource{Name: r.Name, Body: r.Body}
	}
	return out
}

// hooks registers proxies as workloads and tracks connections for pushes.
type hooks struct{ s *Server }

func (h hooks) OnConnect(c *xds.Connection) error {
	if err := checkCaller(c); err != nil {
		return err
	}
	if !h.s.isServing() {
		// Without a snapshot there is no config to send (and no scope to
		// compare later pushes with); the proxy retries with backoff.
		return status.Error(codes.Unavailable, "control plane is starting: no configuration loaded yet")
	}
	switch c.Proxy().Type {
	case model.Waypoint:
		// A waypoint's config is its Gateway's: without the label naming it,
		// it could only be sent a config that serves nothing, for ever.
		if c.Proxy().Labels[config.GatewayNameLabel] == "" {
			return status.Errorf(codes.InvalidArgument, "waypoint proxy %s has no label %s naming its Gateway", c.Proxy().ID, config.GatewayNameLabel)
		}
		// Its pod is declared as a WorkloadEntry (it is no service's
		// endpoint), so it is not registered from its connection.
		return nil
	case model.Ztunnel:
		// A node proxy serves the pods of its node; it is no workload itself.
		return nil
	}
	h.s.reg.ProxyConnected(c.Proxy())
	return nil
}

func (h hooks) OnDisconnect(c *xds.Connection) {
	if registered(c.Proxy()) {
		h.s.reg.ProxyDisconnected(c.Proxy())
	}
}

// registered says whether a proxy's connection registers it as a workload:
// sidecars' and gateways' do; node proxies are none, and waypoints are
// declared.
func registered(p *model.Proxy) bool {
	return p.Type != model.Ztunnel && p.Type != model.Waypoint
}

func (h hooks) ConnectionAdded(c *xds.Connection) {
	h.s.connsMu.Lock()
	// The first config it asks for comes from the current snapshot; later
	// pushes compare against the scope it had then.
	snap := h.s.current.Load()
	st := &connState{prevScope: snap.Scopes.For(c.Proxy())}
	st.digest, _ = contentDigest(snap, c.Proxy()) // on error "": the next push goes
	h.s.conns[c] = st
	h.s.connsMu.Unlock()
}

// PushSent records a proxy's push in the push traces and
// pilot_proxy_convergence_time.
func (h hooks) PushSent(c *xds.Connection, req *model.PushRequest, at time.Time) {
	h.s.traces.sent(req, c.Proxy().ID, at)
	h.s.pm.ObserveConvergence(req, at)
}

func (h hooks) ConnectionRemoved(c *xds.Connection) {
	h.s.connsMu.Lock()
	delete(h.s.conns, c)
	h.s.connsMu.Unlock()
	h.s.queue.Remove(c)
}
