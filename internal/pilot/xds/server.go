package xds

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/internal/excerpt"
	"github.com/meshperf/meshperf/internal/netutil"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// ErrConnectionClosed is returned by Push for a connection whose stream ended.
var ErrConnectionClosed = errors.New("xds connection closed")

// ErrPushDeferred is returned by Push when it stopped waiting on a stream
// busy sending to a proxy that does not read: the push was left with the
// connection, merged with any later one, or is still being sent. It
// completes when the proxy reads, and PushHook.PushSent reports it then.
var ErrPushDeferred = errors.New("xds push deferred: the proxy is not reading what was sent before")

// stuckSend is how long a stream may be in one send before Push stops
// waiting on it. A send returns once gRPC has queued the response, in
// microseconds, unless the proxy has not read the previous 64 KiB yet; one
// blocked this long is to a proxy that does not read (or reads very
// slowly). A Push that waited on such a stream held one of the pipeline's
// PILOT_PUSH_THROTTLE slots for as long as its proxy did not read, and as
// many such proxies as slots (25 on 2 cores) stopped every push to every
// proxy (TestProxiesThatDoNotReadDoNotStallPushes in discovery).
const stuckSend = time.Second

// Server is the ADS server. It implements envoy's
// discovery.AggregatedDiscoveryServiceServer.
type Server struct {
	gen   Generator
	hooks ConnectionHooks
	opts  Options
	log   *slog.Logger
	// limitedLog logs what any client can cause at will (refused streams,
	// requests for types not served) at most once per kind every few
	// seconds, with the count left out.
	limitedLog *netutil.LogLimiter
	m          *metrics
	// cache holds each Body's encodings, shared by every send of it: the
	// bytes ServerOption's codec writes and delta's content versions.
	cache *resourceCache

	pushHook atomic.Pointer[PushHook]

	mu    sync.RWMutex
	conns map[string]*Connection

	connSeq    atomic.Uint64
	versionSeq atomic.Uint64
	nonceSeq   atomic.Uint64
	// instance prefixes nonces, so a proxy that reconnects to a restarted
	// server cannot present an old nonce that happens to match a new one.
	instance string
}

var _ discovery.AggregatedDiscoveryServiceServer = (*Server)(nil)

// NewServer returns a server that sends what gen produces. hooks may be nil.
// Metrics are registered with reg (nil: not exported).
func NewServer(gen Generator, hooks ConnectionHooks, opts Options, reg prometheus.Registerer) *Server {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var id [4]byte
	_, _ = rand.Read(id[:]) // never fails on supported platforms
	return &Server{
		gen: gen, hooks: hooks, opts: opts, log: log, m: newMetrics(reg), cache: &resourceCache{},
		limitedLog: netutil.NewLogLimiter(log, netutil.DefaultLogInterval),
		conns:      make(map[string]*Connection),
		instance:   hex.EncodeToString(id[:]),
	}
}

// Register adds the ADS service to g. Build g with ServerOption, so that sends
// share each resource's encoded bytes instead of copying them per proxy.
func (s *Server) Register(g *grpc.Server) {
	discovery.RegisterAggregatedDiscoveryServiceServer(g, s)
}

// SetPushHook sets (or, with nil, clears) the hook told about connections. The
// pipeline is built after the server it pushes through, hence a setter; call
// it before serving so that no connection is missed.
func (s *Server) SetPushHook(h PushHook) {
	if h == nil {
		s.pushHook.Store(nil)
		return
	}
	s.pushHook.Store(&h)
}

// Connections returns the current connections, sorted by id.
func (s *Server) Connections() []*Connection {
	s.mu.RLock()
	out := make([]*Connection, 0, len(s.conns))
	for _, c := range s.conns {
		out = append(out, c)
	}
	s.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// pushEvent is one Push handed to a stream's goroutine.
type pushEvent struct {
	req  *model.PushRequest
	done chan error // buffered: the stream never waits for Push to collect it
}

// Push generates and sends every type conn watches, in the order CDS, EDS, LDS,
// RDS, SDS, WDS (addresses, then authorizations), or only EDS and WDS
// addresses when req is not Full (nil is a full push). It returns
// once every send returned, not when the proxy acknowledged. The sends happen on
// the stream's own goroutine, so they never interleave with responses to the
// proxy's requests, and a slow proxy holds only its own Push: up to
// Options.SendTimeout per send, or until ctx ends (if ctx ends after the
// stream took the push, Push returns ctx's error and the push still
// completes). Nor does a proxy that does not read hold its caller: once its
// stream has been in one send for stuckSend, Push returns ErrPushDeferred,
// leaving a push the stream has not taken with the connection, where later
// ones merge into it; a push still waiting to be taken when ctx ends is
// left there too.
//
// A generation failure skips that type and is returned, and the stream stays
// up: the proxy keeps its previous config. A send failure ends the stream.
func (s *Server) Push(ctx context.Context, conn *Connection, req *model.PushRequest) error {
	if req == nil {
		req = &model.PushRequest{Full: true}
	}
	if conn.hasDeferred() || conn.sendingFor() >= stuckSend {
		return s.deferPush(conn, req)
	}
	ev := &pushEvent{req: req, done: make(chan error, 1)}
	check := time.NewTimer(stuckSend)
	defer check.Stop()
handOff:
	for {
		select {
		case conn.pushCh <- ev:
			break handOff
		case <-check.C:
			if stuckOrRearm(conn, check) {
				return s.deferPush(conn, req)
			}
		case <-conn.stop:
			return fmt.Errorf("push to %s: %w", conn.id, ErrConnectionClosed)
		case <-ctx.Done():
			return s.deferPush(conn, req)
		}
	}
	for {
		select {
		case err := <-ev.done:
			return err
		case <-check.C:
			if stuckOrRearm(conn, check) {
				s.m.deferredPushes.Inc()
				return fmt.Errorf("push to %s: %w", conn.id, ErrPushDeferred)
			}
		case <-conn.stop:
			// The stream answers before it stops, so a result may be waiting.
			select {
			case err := <-ev.done:
				return err
			default:
				return fmt.Errorf("push to %s: %w", conn.id, ErrConnectionClosed)
			}
		case <-ctx.Done():
			return fmt.Errorf("push to %s: %w", conn.id, ctx.Err())
		}
	}
}

// stuckOrRearm says whether conn's stream has been in one send for
// stuckSend; if not, it sets check to fire when that send would have been.
func stuckOrRearm(conn *Connection, check *time.Timer) bool {
	age := conn.sendingFor()
	if age >= stuckSend {
		return true
	}
	check.Reset(stuckSend - age)
	return false
}

// deferPush leaves req with a connection whose stream is busy sending. A
// connection that has ended drops it with everything else.
func (s *Server) deferPush(conn *Connection, req *model.PushRequest) error {
	if !conn.deferPush(req) {
		s.log.Debug("xds push deferred: the stream is still sending an earlier response", "conn", conn.id, "peer", conn.peer)
	}
	s.m.deferredPushes.Inc()
	return fmt.Errorf("push to %s: %w", conn.id, ErrPushDeferred)
}

// admit applies Options.Admit to a new stream.
func (s *Server) admit(ctx context.Context) error {
	if s.opts.Admit == nil {
		return nil
	}
	if err := s.opts.Admit(ctx); err != nil {
		return status.Errorf(codes.ResourceExhausted, "xDS stream rejected by the new-stream rate limit: %v", err)
	}
	return nil
}

// connect turns a stream's first node into a registered Connection. Every
// refusal, whoever decided it, is logged with the peer and the status code.
func (s *Server) connect(ctx context.Context, node *core.Node, delta bool) (_ *Connection, err error) {
	peerAddr := peerAddress(ctx)
	defer func() {
		if err != nil {
			s.logRefusal(peerAddr, node, err)
		}
	}()
	p, err := proxyFromNode(node)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	conn := &Connection{
		id:            p.ID + "-" + strconv.FormatUint(s.connSeq.Add(1), 10),
		proxy:         p,
		connectedAt:   time.Now(),
		delta:         delta,
		pushCh:        make(chan *pushEvent),
		deferredReady: make(chan struct{}, 1),
		stop:          make(chan struct{}),
		watches:       make(map[string]*watch),
		peer:          peerAddr,
	}
	if s.opts.Authenticate != nil {
		if conn.caller, err = s.opts.Authenticate(ctx); err != nil {
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
	}
	if s.hooks != nil {
		if err := s.hooks.OnConnect(conn); err != nil {
			if _, ok := status.FromError(err); ok {
				return nil, err
			}
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	s.mu.Lock()
	s.conns[conn.id] = conn
	s.mu.Unlock()
	s.m.clients.WithLabelValues(s.m.versions.label(p.IstioVersion)).Inc()
	s.m.awaiting.Inc()
	if h := s.pushHook.Load(); h != nil {
		(*h).ConnectionAdded(conn)
	}
	s.log.Debug("xds connected", "conn", conn.id, "peer", conn.peer, "delta", delta)
	return conn, nil
}

func peerAddress(ctx context.Context) string {
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		return pr.Addr.String()
	}
	return ""
}

// logRefusal logs a refused stream, a line per status code at most every
// few seconds: a proxy refused reconnects in a loop, and a line per attempt
// would bury everything else.
func (s *Server) logRefusal(peerAddr string, node *core.Node, err error) {
	st := status.Convert(err)
	s.limitedLog.Warn("refused_"+st.Code().String(), "xds stream refused",
		"peer", peerAddr, "code", st.Code().String(), "node", excerpt.String(node.GetId()), "error", st.Message())
}

// ignoreUnservedType logs a request for a type the server does not serve,
// which it leaves unanswered: a proxy configured for a
// type (ECDS, NDS) that this control plane does not generate waits for it
// for ever, and only this line says why.
func (s *Server) ignoreUnservedType(conn *Connection, typeURL string) {
	s.limitedLog.Warn("unserved_type", "xds request for a type this server does not serve ignored",
		"conn", conn.id, "peer", conn.peer, "type", excerpt.String(typeURL))
}

// disconnect undoes connect once the stream's goroutine has finished.
func (s *Server) disconnect(conn *Connection) {
	close(conn.stop)
	s.mu.Lock()
	delete(s.conns, conn.id)
	s.mu.Unlock()
	s.m.clients.WithLabelValues(s.m.versions.label(conn.proxy.IstioVersion)).Dec()
	if !conn.configured {
		s.m.awaiting.Dec()
	}
	if h := s.pushHook.Load(); h != nil {
		(*h).ConnectionRemoved(conn)
	}
	if s.hooks != nil {
		s.hooks.OnDisconnect(conn)
	}
	s.log.Debug("xds disconnected", "conn", conn.id)
}

// reportingPushes wraps a stream's push so that every push that went out
// whole is reported to the PushHook.
func (s *Server) reportingPushes(conn *Connection, push func(*model.PushRequest) error) func(*model.PushRequest) error {
	return func(req *model.PushRequest) error {
		err := push(req)
		if h := s.pushHook.Load(); err == nil && h != nil {
			(*h).PushSent(conn, req, time.Now())
		}
		return err
	}
}

// serve runs a stream after its first request: a reader goroutine feeds
// requests in, Push feeds pushes in, and this goroutine alone handles both and
// writes. Requests go first, because a proxy waiting for an answer is blocked
// while a push can wait.
func serve[Req any](ctx context.Context, conn *Connection, recv func() (*Req, error), first *Req,
	handle func(*Req) error, push func(*model.PushRequest) error) error {
	reqs := make(chan *Req, 1)
	var recvErr error
	go func() {
		defer close(reqs)
		for {
			r, err := recv()
			if err != nil {
				recvErr = err
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := handle(first); err != nil {
		return err
	}
	for {
		var r *Req
		var ok bool
		select {
		case r, ok = <-reqs:
		default:
			select {
			case r, ok = <-reqs:
			case ev := <-conn.pushCh:
				err := push(ev.req)
				ev.done <- err
				if isSendError(err) {
					return err
				}
				continue
			case <-conn.deferredReady:
				if req := conn.takeDeferred(); req != nil {
					if err := push(req); isSendError(err) {
						return err
					}
				}
				continue
			case <-ctx.Done():
				return nil
			}
		}
		if !ok {
			return endOfStream(recvErr)
		}
		if err := handle(r); err != nil {
			return err
		}
	}
}

// endOfStream turns the reader's error into the handler's result: a client that
// closed or went away is a normal end.
func endOfStream(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return nil
	}
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable:
		return nil
	}
	return err
}

// sendError marks a failed stream write: the stream is unusable after it.
type sendError struct{ err error }

func (e *sendError) Error() string { return e.err.Error() }
func (e *sendError) Unwrap() error { return e.err }

func isSendError(err error) bool {
	var se *sendError
	return errors.As(err, &se)
}

// send writes one response through write, bounded by Options.SendTimeout, and
// records istiod's send metrics.
//
// What a stream keeps for a proxy that does not read is bounded here: a
// write returns once gRPC has queued the response, which grpc-go does while
// the stream has write quota left (64 KiB beyond what the proxy's
// flow-control window lets out), so at most that and one response wait per
// stream; the next write blocks the stream's goroutine, which then takes no
// push (pushes wait as the connection's one deferred push), and
// SendTimeout, when set, ends the stream
// (TestUnreadResponsesAreBoundedByFlowControl).
func (s *Server) send(conn *Connection, tm *typeMetrics, write func() error) error {
	start := time.Now()
	conn.sendStart.Store(start.UnixNano())
	defer conn.sendStart.Store(0)
	var err error
	if s.opts.SendTimeout > 0 {
		err = sendWithin(s.opts.SendTimeout, write)
	} else {
		err = write()
	}
	s.m.sendTime.Observe(time.Since(start).Seconds())
	if err == nil {
		return nil
	}
	code := status.Code(err)
	if code == codes.DeadlineExceeded {
		s.m.writeTimeouts.Inc()
	}
	// A proxy that went away (Unavailable, Canceled) is not a send error.
	if code != codes.Unavailable && code != codes.Canceled {
		tm.sendErrs.Inc()
		s.log.Warn("xds send failed", "conn", conn.id, "error", err)
	}
	return &sendError{err: fmt.Errorf("send to %s: %w", conn.id, err)}
}

// sendWithin runs write on its own goroutine and gives up after d. gRPC offers
// no way to abandon a blocked write, so on timeout the write stays blocked
// until the stream ends, which the caller then makes happen by returning.
func sendWithin(d time.Duration, write func() error) error {
	done := make(chan error, 1)
	go func() { done <- write() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "send did not finish within %v (%s)", d, EnvSendTimeout)
	}
}

// recordSent notes a response that reached conn's stream, and the stream's
// first full config; stream goroutine only.
func (s *Server) recordSent(conn *Connection, w *watch, version, nonce string) {
	conn.recordSent(w, version, nonce, time.Now())
	if !conn.configured && conn.allSent() {
		conn.configured = true
		s.m.awaiting.Dec()
	}
}

// nextVersion returns a new push version: an RFC 3339 time for people, then a
// counter that makes versions unique and increasing within this server.
func (s *Server) nextVersion() string {
	n := s.versionSeq.Add(1)
	return time.Now().UTC().Format(time.RFC3339) + "/" + strconv.FormatUint(n, 10)
}

func (s *Server) nextNonce() string {
	return s.instance + "-" + strconv.FormatUint(s.nonceSeq.Add(1), 10)
}

// generate calls the Generator and counts its failures. A nil req marks a
// proxy's own request.
func (s *Server) generate(conn *Connection, typeURL string, names []string, req *model.PushRequest) (Resources, error) {
	res, err := s.gen.Generate(conn.proxy, typeURL, names, req)
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, ErrUnchanged) && req != nil:
		return nil, err
	case errors.Is(err, ErrUnchanged):
		// Not wrapped: the caller must not mistake this for a skip.
		err = fmt.Errorf("generator returned %q for a request, which must be answered", err.Error())
	}
	s.m.internalErrs.Inc()
	s.log.Warn("xds generation failed", "conn", conn.id, "type", metricType(typeURL), "error", err)
	return nil, fmt.Errorf("generate %s for %s: %w", metricType(typeURL), conn.id, err)
}

// configSize is the size istiod reports: the encoded resources' bytes.
func configSize(res Resources) int {
	n := 0
	for _, r := range res {
		n += len(r.Body.GetValue())
	}
	return n
}
