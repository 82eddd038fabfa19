package sim

import (
	"context"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/ptr"
)

// runSotW plays a sidecar on a state-of-the-world stream: every request names
// the full set of resources wanted for its type, so ACKs repeat the names.
func (st *session) runSotW(ctx context.Context, cc *adsConn) error {
	stream, err := cc.open(ctx, "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources")
	if err != nil {
		return streamError("opening the ADS stream", err)
	}
	defer stream.Close()
	st.opened()
	var version, nonce [numTypes]string
	nodeSent := false
	send := func(r *discoveryv3.DiscoveryRequest) error {
		// Istio's bootstrap sets set_node_on_first_message_only.
		if !nodeSent {
			node, err := st.p.node()
			if err != nil {
				return err
			}
			r.Node, nodeSent = node, true
		}
		if err := stream.Send(r); err != nil {
			return streamError("sending a request", err)
		}
		return nil
	}
	for _, t := range st.initialTypes() {
		if err := send(&discoveryv3.DiscoveryRequest{TypeUrl: t.URL(), ResourceNames: st.names[t]}); err != nil {
			return err
		}
	}
	for {
		resp := &discoveryv3.DiscoveryResponse{}
		err := stream.Recv(ctx, resp)
		if err != nil {
			return streamError("receiving", err)
		}
		at := time.Now()
		t, ok := typeOfURL(resp.GetTypeUrl())
		if !ok {
			continue // a type this sidecar never asked for
		}
		nack := st.rejects(t)
		var dependent *Type
		if !nack { // a rejected config is not applied, so it names nothing new
			dependent = st.sotwNames(t, resp)
		}
		st.checkWatches(at, func(fn func(string)) {
			for _, a := range resp.GetResources() {
				fn(resourceName(a.GetValue()))
				if t == Route {
					virtualHostNames(a.GetValue(), fn)
				}
			}
		})
		st.received(at, t, nack, len(resp.GetResources()), 0, proto.Size(resp), resp.GetVersionInfo(), resp.GetNonce())
		ack := &discoveryv3.DiscoveryRequest{TypeUrl: t.URL(), ResponseNonce: resp.GetNonce(), ResourceNames: st.names[t]}
		if nack {
			// A NACK carries the version the proxy still runs.
			ack.VersionInfo, ack.ErrorDetail = version[t], st.nackDetail(t)
		} else {
			ack.VersionInfo = resp.GetVersionInfo()
			version[t] = resp.GetVersionInfo()
		}
		nonce[t] = resp.GetNonce()
		if err := send(ack); err != nil {
			return err
		}
		if dependent == nil {
			continue
		}
		// CDS or LDS changed the set of endpoints or routes to ask for.
		next := *dependent
		if err := send(&discoveryv3.DiscoveryRequest{
			TypeUrl: next.URL(), ResourceNames: st.names[next], VersionInfo: version[next], ResponseNonce: nonce[next],
		}); err != nil {
			return err
		}
	}
}

// sotwNames reads the EDS and RDS names a CDS or LDS response implies and
// returns the type whose subscription changed, if any.
func (st *session) sotwNames(t Type, resp *discoveryv3.DiscoveryResponse) *Type {
	var changed *Type
	switch t {
	case Cluster:
		var eds []string
		for _, a := range resp.GetResources() {
			if _, name, ok := clusterEDSName(a.GetValue()); ok {
				eds = append(eds, name)
			}
		}
		if added, removed := st.setDependent(Endpoint, eds); added != nil || removed != nil {
			changed = ptr.To(Endpoint)
		}
	case Listener:
		var routes []string
		for _, a := range resp.GetResources() {
			_, rs := listenerRouteNames(a.GetValue())
			routes = append(routes, rs...)
		}
		if added, removed := st.setDependent(Route, routes); added != nil || removed != nil {
			changed = ptr.To(Route)
		}
	}
	return changed
}
