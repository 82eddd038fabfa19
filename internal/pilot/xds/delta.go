package xds

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"sort"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

type deltaServerStream = grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]

// DeltaAggregatedResources serves one delta (incremental) ADS stream.
func (s *Server) DeltaAggregatedResources(stream grpc.BidiStreamingServer[discovery.DeltaDiscoveryRequest, discovery.DeltaDiscoveryResponse]) error {
	ctx := stream.Context()
	if err := s.admit(ctx); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return endOfStream(err)
	}
	conn, err := s.connect(ctx, first.GetNode(), true)
	if err != nil {
		return err
	}
	defer s.disconnect(conn)
	st := &deltaStream{s: s, conn: conn, stream: stream}
	return serve(ctx, conn, stream.Recv, first, st.handle, s.reportingPushes(conn, st.push))
}

// deltaStream is a delta stream's handling; its methods run on the stream's
// goroutine only. The server remembers which version of each resource the
// proxy has, and sends only what differs plus the names that went away.
type deltaStream struct {
	s      *Server
	conn   *Connection
	stream deltaServerStream
}

// handle applies one request. An ACK follows SotW's rules: of a response
// other than the latest it is stale, counted and ignored. A NACK counts for
// any response not yet answered, since in delta each response carries
// resources of its own and a later one need not repeat them. Subscription
// changes are applied whatever the nonce, because in delta they are changes
// rather than a full list the proxy will repeat: dropping one would lose it
// for good.
func (st *deltaStream) handle(req *discovery.DeltaDiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	tm := st.s.m.byType[typeURL]
	if tm == nil {
		st.s.ignoreUnservedType(st.conn, typeURL)
		return nil
	}
	w := st.conn.watch(typeURL)
	first := w == nil
	if first {
		// A proxy that reconnects lists what it already has, so that only
		// what changed since is sent again.
		w = &watch{
			typeURL:  typeURL,
			wildcard: isWildcardType(typeURL) && len(req.GetResourceNamesSubscribe()) == 0,
			have:     maps.Clone(req.GetInitialResourceVersions()),
		}
		if w.have == nil {
			w.have = make(map[string]string)
		}
		st.conn.update(func() { st.conn.watches[typeURL] = w })
	}
	resend := false
	if nonce := req.GetResponseNonce(); nonce != "" && !first {
		sent, later, waiting := w.answered(nonce)
		switch {
		case !waiting:
			tm.expired.Inc() // answered before, or never ours
		case req.GetErrorDetail() != nil:
			tm.rejects.Inc()
			st.conn.recordNack(w, req.GetErrorDetail().GetMessage())
			// The proxy kept its previous versions of what it rejected: forget
			// that it has ours, so that they are offered again.
			for _, name := range sent.names {
				if _, ok := w.have[name]; ok {
					w.have[name] = ""
				}
			}
			// A NACK of a response that later ones followed (it crossed them
			// on the wire) may be of resources none of them carried, which
			// no push would offer again until they change: send them now.
			// Had they not changed since, the proxy NACKs the latest
			// response, which waits for the next push.
			resend = later
			st.s.log.Warn("xds NACK", "conn", st.conn.id, "type", metricType(typeURL),
				"error", req.GetErrorDetail().GetMessage())
		case nonce != w.nonceSent:
			tm.expired.Inc() // an ACK that a later response overtook
		default:
			st.conn.recordAck(w, w.versionSent, nonce)
		}
	}
	added := st.applySubscriptions(w, req.GetResourceNamesSubscribe(), req.GetResourceNamesUnsubscribe())
	answer := first || len(added) > 0
	if !answer && !resend {
		return nil
	}
	if err := st.sendType(w, nil, st.s.nextVersion(), added, answer); err != nil {
		if isSendError(err) {
			return err
		}
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

// applySubscriptions updates w's names and returns the newly subscribed ones.
// "*" turns wildcard on or off explicitly.
func (st *deltaStream) applySubscriptions(w *watch, subscribe, unsubscribe []string) []string {
	if len(subscribe) == 0 && len(unsubscribe) == 0 {
		return nil
	}
	var added []string
	st.conn.update(func() {
		set := make(map[string]struct{}, len(w.names)+len(subscribe))
		for _, n := range w.names {
			set[n] = struct{}{}
		}
		for _, n := range subscribe {
			if n == "*" {
				if !w.wildcard {
					w.wildcard = true
					added = append(added, n)
				}
				continue
			}
			if _, ok := set[n]; !ok {
				set[intern(n)] = struct{}{}
				added = append(added, n)
			}
		}
		for _, n := range unsubscribe {
			if n == "*" {
				w.wildcard = false
				continue
			}
			delete(set, n)
			delete(w.have, n) // the proxy drops it itself
		}
		w.names = slices.Sorted(maps.Keys(set))
	})
	return added
}

// push carries out one Push on this stream.
func (st *deltaStream) push(req *model.PushRequest) error {
	version := st.s.nextVersion()
	var firstErr error
	for _, w := range st.conn.pushWatches(req.Full) {
		if err := st.sendType(w, req, version, nil, false); err != nil {
			if isSendError(err) {
				return err
			}
			firstErr = cmp.Or(firstErr, err)
		}
	}
	return firstErr
}

// sendType generates one type and sends what the proxy does not have. req is
// nil when the proxy asked; asked are the names it just subscribed to, which
// get an answer even if they do not exist (as removed), so it need not wait.
// answer sends a response even when it has nothing in it: the proxy waits
// for one.
func (st *deltaStream) sendType(w *watch, req *model.PushRequest, version string, asked []string, answer bool) error {
	s, tm := st.s, st.s.m.byType[w.typeURL]
	start := time.Now()
	var res Resources
	if w.subscribed() {
		names := w.names
		if w.wildcard {
			names = nil
		}
		var err error
		res, err = s.generate(st.conn, w.typeURL, names, req)
		if errors.Is(err, ErrUnchanged) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	resp, versions, sent := diff(w, res, asked, s.cache.contentVersion)
	if !answer && len(resp.Resources) == 0 && len(resp.RemovedResources) == 0 {
		return nil // a push that changed nothing this proxy has
	}
	resp.TypeUrl, resp.SystemVersionInfo, resp.Nonce = w.typeURL, version, s.nextNonce()
	if err := s.send(st.conn, tm, func() error { return st.stream.Send(resp) }); err != nil {
		return err
	}
	for _, name := range resp.RemovedResources {
		delete(w.have, name)
	}
	sentNames := make([]string, 0, len(resp.Resources))
	for _, r := range resp.Resources {
		w.have[r.Name] = versions[r.Name]
		sentNames = append(sentNames, r.Name)
	}
	if len(w.unanswered) == maxUnanswered {
		w.unanswered = slices.Delete(w.unanswered, 0, 1)
	}
	w.unanswered = append(w.unanswered, sentResponse{nonce: resp.Nonce, names: sentNames})
	s.recordSent(st.conn, w, version, resp.Nonce)
	tm.pushes.Inc()
	tm.pushTime.Observe(time.Since(start).Seconds())
	tm.configSize.Observe(float64(sent))
	return nil
}

// diff builds the response body: resources whose version the proxy lacks, and
// names it has (or just asked for) that no longer exist. It also returns each
// generated resource's version and the bytes of the resources included.
// versionOf derives a version for resources that carry none.
func diff(w *watch, res Resources, asked []string, versionOf func(*anypb.Any) string) (*discovery.DeltaDiscoveryResponse, map[string]string, int) {
	resp := &discovery.DeltaDiscoveryResponse{}
	versions := make(map[string]string, len(res))
	sent := 0
	for _, r := range res {
		v := r.Version
		if v == "" {
			v = versionOf(r.Body)
		}
		versions[r.Name] = v
		if have, ok := w.have[r.Name]; ok && have == v {
			continue
		}
		resp.Resources = append(resp.Resources, &discovery.Resource{Name: r.Name, Version: v, Resource: r.Body})
		sent += len(r.Body.GetValue())
	}
	for name := range w.have {
		if _, ok := versions[name]; !ok {
			resp.RemovedResources = append(resp.RemovedResources, name)
		}
	}
	for _, name := range asked {
		_, exists := versions[name]
		_, had := w.have[name]
		if name != "*" && !exists && !had {
			resp.RemovedResources = append(resp.RemovedResources, name)
		}
	}
	sort.Strings(resp.RemovedResources)
	return resp, versions, sent
}
