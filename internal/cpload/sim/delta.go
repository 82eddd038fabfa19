package sim

import (
	"context"
	"maps"
	"slices"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/proto"
)

// runDelta plays a sidecar on a delta stream: requests change subscriptions,
// responses carry only what changed and the names removed, and an ACK is the
// nonce alone.
func (st *session) runDelta(ctx context.Context, cc *adsConn) error {
	stream, err := cc.open(ctx, "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources")
	if err != nil {
		return streamError("opening the delta ADS stream", err)
	}
	defer stream.Close()
	st.opened()
	st.edsOf, st.routesOf = map[string]string{}, map[string][]string{}
	nodeSent := false
	send := func(r *discoveryv3.DeltaDiscoveryRequest) error {
		if !nodeSent {
			node, err := st.p.node()
			if err != nil {
				return err
			}
			r.Node, nodeSent = node, true
		}
		if err := stream.Send(r); err != nil {
			return streamError("sending a delta request", err)
		}
		return nil
	}
	for _, t := range st.initialTypes() {
		if err := send(&discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.URL(), ResourceNamesSubscribe: st.names[t]}); err != nil {
			return err
		}
	}
	for {
		resp := &discoveryv3.DeltaDiscoveryResponse{}
		err := stream.Recv(ctx, resp)
		if err != nil {
			return streamError("receiving", err)
		}
		at := time.Now()
		t, ok := typeOfURL(resp.GetTypeUrl())
		if !ok {
			continue
		}
		nack := st.rejects(t)
		var next Type
		var added, removed []string
		if !nack { // a rejected config is not applied, so it names nothing new
			next, added, removed = st.deltaNames(t, resp)
		}
		st.received(at, t, nack, len(resp.GetResources()), len(resp.GetRemovedResources()), proto.Size(resp),
			resp.GetSystemVersionInfo(), resp.GetNonce())
		ack := &discoveryv3.DeltaDiscoveryRequest{TypeUrl: t.URL(), ResponseNonce: resp.GetNonce()}
		if nack {
			ack.ErrorDetail = st.nackDetail(t)
		}
		st.checkWatches(at, func(fn func(string)) {
			for _, r := range resp.GetResources() {
				fn(r.GetName())
				if t == Route {
					virtualHostNames(r.GetResource().GetValue(), fn)
				}
			}
		})
		if err := send(ack); err != nil {
			return err
		}
		if added == nil && removed == nil {
			continue
		}
		if err := send(&discoveryv3.DeltaDiscoveryRequest{
			TypeUrl: next.URL(), ResourceNamesSubscribe: added, ResourceNamesUnsubscribe: removed,
		}); err != nil {
			return err
		}
	}
}

// deltaNames applies a CDS or LDS delta to what the proxy knows and returns the
// EDS or RDS subscription changes it implies.
func (st *session) deltaNames(t Type, resp *discoveryv3.DeltaDiscoveryResponse) (Type, []string, []string) {
	switch t {
	case Cluster:
		for _, name := range resp.GetRemovedResources() {
			delete(st.edsOf, name)
		}
		for _, r := range resp.GetResources() {
			name, eds, isEDS := clusterEDSName(r.GetResource().GetValue())
			if name == "" {
				name = r.GetName()
			}
			if isEDS {
				st.edsOf[intern(name)] = intern(eds)
			} else {
				delete(st.edsOf, name)
			}
		}
		added, removed := st.setDependent(Endpoint, slices.Collect(maps.Values(st.edsOf)))
		return Endpoint, added, removed
	case Listener:
		for _, name := range resp.GetRemovedResources() {
			delete(st.routesOf, name)
		}
		for _, r := range resp.GetResources() {
			_, routes := listenerRouteNames(r.GetResource().GetValue())
			if len(routes) == 0 {
				delete(st.routesOf, r.GetName())
				continue
			}
			st.routesOf[intern(r.GetName())] = routes
		}
		var all []string
		for _, rs := range st.routesOf {
			all = append(all, rs...)
		}
		added, removed := st.setDependent(Route, all)
		return Route, added, removed
	}
	return t, nil, nil
}
