package xds

import (
	"cmp"
	"errors"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

type sotwServerStream = grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]

// StreamAggregatedResources serves one state-of-the-world ADS stream.
func (s *Server) StreamAggregatedResources(stream grpc.BidiStreamingServer[discovery.DiscoveryRequest, discovery.DiscoveryResponse]) error {
	ctx := stream.Context()
	if err := s.admit(ctx); err != nil {
		return err
	}
	first, err := stream.Recv()
	if err != nil {
		return endOfStream(err)
	}
	conn, err := s.connect(ctx, first.GetNode(), false)
	if err != nil {
		return err
	}
	defer s.disconnect(conn)
	st := &sotwStream{s: s, conn: conn, stream: stream}
	return serve(ctx, conn, stream.Recv, first, st.handle, s.reportingPushes(conn, st.push))
}

// sotwStream is a state-of-the-world stream's handling; its methods run on the
// stream's goroutine only.
type sotwStream struct {
	s      *Server
	conn   *Connection
	stream sotwServerStream
}

// handle applies one request. In SotW every request names the full set the
// proxy wants, so the only question is whether it needs an answer: a first
// request does, an ACK only if it changed the names, a NACK or a request with a
// stale nonce never does.
func (st *sotwStream) handle(req *discovery.DiscoveryRequest) error {
	typeURL := req.GetTypeUrl()
	tm := st.s.m.byType[typeURL]
	if tm == nil {
		st.s.ignoreUnservedType(st.conn, typeURL)
		return nil
	}
	names := sortedNames(req.GetResourceNames())
	w := st.conn.watch(typeURL)
	switch {
	case w == nil || req.GetResponseNonce() == "":
		// A first request, or one from a proxy starting over (it reconnected
		// to us, or lost its state): answer whatever nonce it carries.
		return st.subscribe(typeURL, w, names)
	case req.GetResponseNonce() != w.nonceSent:
		// The proxy has not seen our latest response yet; it will answer that.
		tm.expired.Inc()
		return nil
	case req.GetErrorDetail() != nil:
		tm.rejects.Inc()
		st.conn.recordNack(w, req.GetErrorDetail().GetMessage())
		st.s.log.Warn("xds NACK", "conn", st.conn.id, "type", metricType(typeURL),
			"version", req.GetVersionInfo(), "error", req.GetErrorDetail().GetMessage())
		return nil
	}
	st.conn.recordAck(w, req.GetVersionInfo(), req.GetResponseNonce())
	if slices.Equal(names, w.names) {
		return nil
	}
	return st.subscribe(typeURL, w, names)
}

// subscribe sets the type's names and answers them. A named type with no names
// left is an unsubscribe: the watch goes and nothing is sent.
func (st *sotwStream) subscribe(typeURL string, w *watch, names []string) error {
	if !isWildcardType(typeURL) && len(names) == 0 {
		if w != nil {
			st.conn.update(func() { delete(st.conn.watches, typeURL) })
		}
		return nil
	}
	st.conn.update(func() {
		if w == nil {
			w = &watch{typeURL: typeURL}
			st.conn.watches[typeURL] = w
		}
		w.names = names
		w.wildcard = isWildcardType(typeURL) && len(names) == 0
	})
	if err := st.sendType(w, nil, st.s.nextVersion()); err != nil {
		if isSendError(err) {
			return err
		}
		// The proxy waits for this answer and will not get one: end the stream
		// so it sees why and retries.
		return status.Errorf(codes.Internal, "%v", err)
	}
	return nil
}

// push carries out one Push on this stream.
func (st *sotwStream) push(req *model.PushRequest) error {
	version := st.s.nextVersion()
	var firstErr error
	for _, w := range st.conn.pushWatches(req.Full) {
		if err := st.sendType(w, req, version); err != nil {
			if isSendError(err) {
				return err
			}
			firstErr = cmp.Or(firstErr, err)
		}
	}
	return firstErr
}

// sendType generates one type and sends it. req is nil when the proxy asked.
func (st *sotwStream) sendType(w *watch, req *model.PushRequest, version string) error {
	s, tm := st.s, st.s.m.byType[w.typeURL]
	start := time.Now()
	res, err := s.generate(st.conn, w.typeURL, w.names, req)
	if errors.Is(err, ErrUnchanged) {
		return nil
	}
	if err != nil {
		return err
	}
	bodies := make([]*anypb.Any, len(res))
	for i := range res {
		bodies[i] = res[i].Body
	}
	resp := &discovery.DiscoveryResponse{
		VersionInfo: version,
		Resources:   bodies,
		TypeUrl:     w.typeURL,
		Nonce:       s.nextNonce(),
	}
	if err := s.send(st.conn, tm, func() error { return st.stream.Send(resp) }); err != nil {
		return err
	}
	s.recordSent(st.conn, w, version, resp.Nonce)
	tm.pushes.Inc()
	tm.pushTime.Observe(time.Since(start).Seconds())
	tm.configSize.Observe(float64(configSize(res)))
	return nil
}
