// Package discovery is meshperf's control plane assembled: it joins the config
// store, the service registry, istiod's push pipeline (inbound updates ->
// debounce -> push snapshot -> per-proxy queue -> throttle -> dependency filter)
// and the xDS server, in that direction. Everything it wires is its own package;
// this one only decides what flows where.
package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/ca"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/registry"
	"github.com/meshperf/meshperf/internal/pilot/scope"
	"github.com/meshperf/meshperf/internal/pilot/snapshot"
	"github.com/meshperf/meshperf/internal/pilot/store"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// The scopes the control plane's parts log under, named as istiod names the
// same parts where it has them.
const (
	ScopeADS   = "ads"   // the xDS server: connections, NACKs, failed sends
	ScopePush  = "push"  // debounce decisions
	ScopeCA    = "ca"    // the built-in CA: its root, certificate rotation
	ScopeStore = "store" // the --configDir watcher
	ScopeKube  = "kube"  // the Kubernetes informers: rejected objects
)

// Options configure the control plane.
type Options struct {
	// StorePath is the embedded store's file; ConfigDir, when set, replaces the
	// store with a directory of YAML files (istiod's file mode).
	StorePath string
	ConfigDir string
	// WatchBuffer is how many config events the store's watch may fall
	// behind before it ends and the control plane lists everything again
	// (store.DefaultWatchBuffer if 0).
	WatchBuffer int
	// Kube, when set, replaces both: config and the service registry come
	// from a Kubernetes cluster (istiod's mode), and Run waits for its
	// informers to sync before the first push. Server.Close closes it.
	Kube *kube.Source
	// CADir holds the root certificate and key of the built-in CA.
	CADir string
	// CertificateAuth, when set (on Kubernetes), authenticates the callers
	// of the certificate API and of xDS streams that send a token
	// (ca.TokenReviewAuthenticator). Off Kubernetes the control plane's own
	// tokens do (ca.TokenIssuer, its key in CADir).
	CertificateAuth ca.Authenticator
	Mesh            *meshconfig.MeshConfig // nil: config.DefaultMeshConfig()
	DomainSuffix    string                 // "cluster.local" if empty
	Push            push.Options
	XDS             xds.Options
	GracePeriod     time.Duration // for disconnected proxies' workloads; registry default if 0
	// ProxiesPath, when set, is where the registered proxies are saved as
	// they change and restored from at start, so that a restarted control
	// plane keeps serving their endpoints until they reconnect (see
	// registry.ProxyRecord).
	ProxiesPath string
	// InsecureTrustClaimedIdentity restores trusting what a proxy claims:
	// SDS serves the secrets of the identity in any stream's node metadata,
	// and the certificate API signs for any caller, impersonation included.
	// For tools that simulate many proxies from one process, on loopback
	// only (the CLI refuses it on other addresses); refused on Kubernetes.
	InsecureTrustClaimedIdentity bool
	// Logger receives the control plane's own lines (the "default" scope).
	Logger *slog.Logger
	// ScopeLogger, when set, gives each part of the control plane its own
	// logger by scope name (the Scope constants), so that
	// --log_output_level ads:debug turns on one part's debug lines only;
	// nil logs every part to Logger.
	ScopeLogger func(scope string) *slog.Logger
	// Registry receives every metric; nil makes a new one with the process and
	// Go collectors (see Metrics).
	Registry *prometheus.Registry
}

// Server is the running control plane.
type Server struct {
	opts    Options
	log     *slog.Logger
	metrics *prometheus.Registry

	store   store.Reader
	writer  store.Writer // nil in file mode
	closer  func() error
	ca      *ca.CA
	tokens  *ca.TokenIssuer // nil on Kubernetes
	reg     *registry.Registry
	filter  *scope.NamespaceFilter
	inbox   *push.Inbox
	pm      *push.Metrics
	queue   *push.Queue[*xds.Connection]
	xds     *xds.Server
	current atomic.Pointer[snapshot.Snapshot]
	pushes  atomic.Int64
	// lastScopes is the scope index the last snapshot built from, and
	// the store revision it reflects (see buildSnapshot).
	lastScopes atomic.Pointer[scopesAt]
	// sdsRefused counts SDS requests refused because the proxy's identity
	// is not proven (refusesSDS).
	sdsRefused prometheus.Counter

	ctx context.Context // set by Run; inbound updates stop with it
	// stopWatch ends the config store's current watch, which a Resync
	// replaces.
	watchMu      sync.Mutex
	stopWatch    func()
	watchStopped bool
	// serving is closed once Run has published the first snapshot: before
	// that there is nothing to answer a proxy with, so streams are refused.
	serving  chan struct{}
	connsMu  sync.Mutex
	conns    map[*xds.Connection]*connState
	statusMu sync.Mutex
	status   PushStatus
	traces   pushTraces
}

// scopesAt is a Sidecar scope index and the store revision it was built at.
type scopesAt struct {
	revision int64
	index    *scope.Index
}

// connState is what the push filter remembers of a connection.
type connState struct {
	prevScope *scope.SidecarScope // the scope of the last push it got
	// digest identifies what a node proxy or waypoint was last pushed
	// (contentDigest); "" for other proxies.
	digest string
}

// contentDigest identifies what a proxy that is pushed by content is sent
// from snap: node proxies (the whole mesh's WDS) and waypoints (their
// Gateway's services, routes and endpoints). Other proxies are pushed by
// their Sidecar scope's dependencies and get "".
func contentDigest(snap *snapshot.Snapshot, p *model.Proxy) (string, error) {
	switch p.Type {
	case model.Ztunnel:
		return snap.AmbientDigest()
	case model.Waypoint:
		return snap.WaypointDigest(p)
	}
	return "", nil
}

// New opens the store and the CA and assembles the pipeline; Run starts it.
func New(opts Options) (*Server, error) {
	if opts.Mesh == nil {
		opts.Mesh = config.DefaultMeshConfig()
	}
	if opts.DomainSuffix == "" {
		opts.DomainSuffix = scope.DefaultDomainSuffix
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reg := opts.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s := &Server{opts: opts, log: log, metrics: reg, conns: map[*xds.Connection]*connState{}, ctx: context.Background(),
		serving: make(chan struct{})}
	if err := s.openStore(); err != nil {
		return nil, err
	}
	filter, err := scope.NewNamespaceFilter(opts.Mesh.GetDiscoverySelectors(), nil)
	if err != nil {
		s.closer()
		return nil, fmt.Errorf("mesh config discoverySelectors: %w", err)
	}
	s.filter = filter
	if s.ca, err = ca.Open(opts.CADir, opts.Mesh.GetTrustDomain(), ca.WithLogger(s.scopeLog(ScopeCA))); err != nil {
		s.closer()
		return nil, err
	}
	if err := s.openIdentity(); err != nil {
		s.closer()
		return nil, err
	}
	regOpts := registry.Options{DomainSuffix: opts.DomainSuffix, GracePeriod: opts.GracePeriod, EndpointSlices: opts.Kube != nil}
	if !filter.SelectsAll() {
		regOpts.NamespaceSelected = func(_ string, labels map[string]string) bool { return filter.Matches(labels) }
	}
	s.reg = registry.New(regOpts, s.registryChanged)
	s.pm = push.NewMetrics(reg)
	s.inbox = push.NewInbox(s.pm)
	s.queue = push.NewQueue[*xds.Connection](push.RealClock{}, s.pm)
	limiter := push.NewStreamLimiter(opts.Push)
	xo := opts.XDS
	xo.Admit, xo.Logger, xo.Authenticate = limiter.Wait, s.scopeLog(ScopeADS), s.authenticateStream
	s.xds = xds.NewServer(generator{s}, hooks{s}, xo, reg)
	s.xds.SetPushHook(hooks{s})
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "pilot_services", Help: "Total services known to pilot.",
	}, func() float64 { return float64(s.reg.ServiceCount()) }))
	s.sdsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "pilot_sds_refused",
		Help: "SDS requests answered with no secret because the proxy did not prove its identity (it gets its certificate from the CA, with a token).",
	})
	reg.MustRegister(s.sdsRefused)
	if opts.Kube != nil {
		reg.MustRegister(opts.Kube.Collectors()...)
	}
	// After the inbox exists: restoring registers endpoints, which notifies.
	if err := s.restoreProxies(); err != nil {
		s.closer()
		return nil, err
	}
	return s, nil
}

func (s *Server) openStore() error {
	if k := s.opts.Kube; k != nil {
		// The writer refuses writes with the cluster's name, so that
		// `meshperf apply` says where to change config instead.
		s.store, s.writer, s.closer = k.Store(), k.Store(), k.Close
		return nil
	}
	if s.opts.ConfigDir != "" {
		d, err := store.OpenDir(s.opts.ConfigDir, s.scopeLog(ScopeStore), s.storeOptions()...)
		if err != nil {
			return err
		}
		s.store, s.closer = d, d.Close
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.opts.StorePath), 0o700); err != nil {
		return fmt.Errorf("store directory: %w", err)
	}
	db, err := store.Open(s.opts.StorePath, s.storeOptions()...)
	if err != nil {
		return err
	}
	s.store, s.writer, s.closer = db, db, db.Close
	return nil
}

func (s *Server) storeOptions() []store.Option {
	if s.opts.WatchBuffer > 0 {
		return []store.Option{store.WithWatchBuffer(s.opts.WatchBuffer)}
	}
	return nil
}

// scopeLog is the logger of one part of the control plane.
func (s *Server) scopeLog(scope string) *slog.Logger {
	if s.opts.ScopeLogger == nil {
		return s.log
	}
	return s.opts.ScopeLogger(scope)
}

// Store is the configuration store, for the API.
func (s *Server) Store() store.Reader { return s.store }

// Writer is the store's write side; nil in file mode, one that refuses
// every write in the Kubernetes mode.
func (s *Server) Writer() store.Writer { return s.writer }

// Metrics is the registry every metric is on, for /metrics.
func (s *Server) Metrics() *prometheus.Registry { return s.metrics }

// RegisterGRPC serves ADS on g.
func (s *Server) RegisterGRPC(g *grpc.Server) { s.xds.Register(g) }

// RegisterSecureGRPC serves what istiod serves on its TLS port (15012): ADS
// and the certificate API (istio.v1.auth.IstioCertificateService), which
// proxies call for their certificates with their tokens. With
// InsecureTrustClaimedIdentity the certificate API authenticates no
// caller, so it is served on the TLS port only.
func (s *Server) RegisterSecureGRPC(g *grpc.Server) {
	s.xds.Register(g)
	ca.NewCertificateService(s.ca, s.scopeLog(ScopeCA), s.certificateServiceOptions()...).Register(g)
}

// GRPCServerOptions are the options to build the grpc.Server for RegisterGRPC with.
func (s *Server) GRPCServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{s.xds.ServerOption()}
}

// Close releases the store.
func (s *Server) Close() error { return s.closer() }

// Run loads the configuration, makes the first snapshot, and runs the
// pipeline until ctx ends. It is called once.
func (s *Server) Run(ctx context.Context) error {
	s.ctx = ctx
	if k := s.opts.Kube; k != nil {
		// istiod pushes nothing until its informers have synced: a first
		// push from half a listing would withdraw everything not yet seen.
		if err := k.Start(ctx, s.reg); err != nil {
			return err
		}
	}
	s.watchConfig()
	defer s.stopWatchingConfig()
	s.publish(s.buildSnapshot())
	close(s.serving)

	debouncer := push.NewDebouncer(s.opts.Push, push.RealClock{}, s.startPush, s.pm).WithLogger(s.scopeLog(ScopePush))
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); debouncer.Run(ctx, s.inbox.C()) }()
	go func() { defer wg.Done(); s.saveProxies(ctx) }()
	go func() {
		defer wg.Done()
		push.RunPushes(ctx, s.queue, s.opts.Push.EffectiveThrottle(), s.pushConnection)
	}()
	go func() { defer wg.Done(); s.rotateCertificates(ctx) }()
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
	return nil
}

// watchConfig lists the store into the registry and watches it from there
// on; it runs again after the watch fell behind (see onEvent).
func (s *Server) watchConfig() {
	_, cancel := store.ListWatch(s.store, s.loadAll, s.onEvent)
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	if s.watchStopped { // Run ended while this relisted
		cancel()
		return
	}
	s.stopWatch = cancel
}

func (s *Server) stopWatchingConfig() {
	s.watchMu.Lock()
	defer s.watchMu.Unlock()
	s.watchStopped = true
	if s.stopWatch != nil {
		s.stopWatch()
	}
}

// loadAll makes the registry's config that of a full listing (ListWatch
// may call it again: it replaces, it does not add).
func (s *Server) loadAll() {
	var listing []*config.Resource
	for _, kind := range registry.ConfigKinds {
		listing = append(listing, s.store.List(kind, "")...)
	}
	s.reg.ReplaceConfig(listing)
}

// onEvent turns a store change into an inbound update.
func (s *Server) onEvent(ev store.Event) {
	switch ev.Type {
	case store.Resync:
		// The watch fell behind (a write larger than its buffer, such as
		// a whole mesh applied at once) and has ended: list again, watch
		// again, and push everything, or no change after it would ever
		// reach a proxy. The ended watcher calls this from its own
		// goroutine, after it has stopped.
		s.log.Warn("config watch fell behind; listing everything again and watching from there")
		if s.ctx.Err() != nil {
			return
		}
		s.watchConfig()
		s.inbound(push.InboundConfig, model.NewPushRequest(model.ReasonGlobal, true, time.Now()))
		return
	}
	switch ev.Key.Kind {
	case config.KindNamespace, config.KindService, config.KindServiceEntry, config.KindWorkloadEntry:
		s.reg.Update(ev.Old, ev.New) // the registry says what to push
		if ev.Key.Kind != config.KindNamespace {
			return
		}
	}
	if ns := ev.Key.Namespace; ns != "" && !s.namespaceSelected(ns) {
		return
	}
	s.inbound(push.InboundConfig, model.NewPushRequest(model.ReasonConfig, true, time.Now(), ev.Key))
}

func (s *Server) namespaceSelected(ns string) bool {
	if s.filter.SelectsAll() {
		return true
	}
	r, ok := s.store.Get(config.Key{Kind: config.KindNamespace, Name: ns})
	if !ok {
		return s.filter.Matches(nil)
	}
	return s.filter.Matches(r.Meta.Labels)
}

func (s *Server) registryChanged(t registry.InboundType, req *model.PushRequest) {
	s.inbound(push.InboundType(t), req)
}

// Serving is closed once Run has made the first snapshot. Listeners may be
// served before that: until then xDS streams are refused with Unavailable
// (istiod refuses them the same way until its caches have synced), and the
// proxies retry.
func (s *Server) Serving() <-chan struct{} { return s.serving }

func (s *Server) isServing() bool {
	select {
	case <-s.serving:
		return true
	default:
		return false
	}
}

// inbound hands a change to the debouncer once the pipeline runs (changes seen
// while loading are in the first snapshot anyway).
func (s *Server) inbound(t push.InboundType, req *model.PushRequest) {
	if !s.isServing() {
		return
	}
	if err := s.inbox.Inbound(s.ctx, t, req); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Error("inbound update dropped", "err", err)
	}
}

// buildSnapshot makes the push context from the store and the registry.
// The Sidecar scope index depends on the store's config alone, so while the
// store's revision stands still (endpoint changes: proxies connecting, pods
// scaling) each push keeps the previous snapshot's index and the scopes it
// has built; rebuilding every namespace's scope per endpoint push cost
// services x namespaces each time.
func (s *Server) buildSnapshot() *snapshot.Snapshot {
	rev := s.store.Revision() // before listing: a write in between makes the next build differ
	var scopes *scope.Index
	if last := s.lastScopes.Load(); last != nil && last.revision == rev {
		scopes = last.index
	}
	var rs []*config.Resource
	for _, kind := range config.Kinds {
		rs = append(rs, s.store.List(kind, "")...)
	}
	if !s.filter.SelectsAll() {
		f, err := scope.NewNamespaceFilter(s.opts.Mesh.GetDiscoverySelectors(), rs)
		if err == nil {
			rs = f.Filter(rs)
		}
	}
	snap := snapshot.Build(snapshot.Input{
		Version:   strconv.FormatInt(s.pushes.Load(), 10),
		Resources: rs, Registry: s.reg.Snapshot(), Mesh: s.opts.Mesh,
		DomainSuffix: s.opts.DomainSuffix, CA: s.ca, Scopes: scopes,
	})
	s.lastScopes.Store(&scopesAt{rev, snap.Scopes})
	return snap
}

func (s *Server) publish(snap *snapshot.Snapshot) { s.current.Store(snap) }

// startPush is the debouncer's push: one snapshot, then a queued push for every
// connected proxy the push concerns.
func (s *Server) startPush(req *model.PushRequest) {
	begin := time.Now()
	s.traces.begin(s.pushes.Add(1), req, begin)
	snap := s.buildSnapshot()
	s.pm.ObservePushContextInit(time.Since(begin))
	s.publish(snap)
	conns := s.connections()
	s.recordPush(req, snap, len(conns))
	s.queue.StartPush(req, s.concerned(snap, req, conns))
}

// concerned keeps the connections a push may concern: istiod's per-proxy
// filter (needsPush), applied as the push starts and once per pair of
// scopes (before, now) rather than once per proxy. Filtering only when
// each proxy's turn comes let every push reach every proxy's queue entry:
// while thousands of proxies connect, each connect is an endpoint change,
// and every proxy's pending request then gathered every other proxy's
// endpoint keys, so that connecting n proxies cost O(n²). The filter runs
// again when each is dequeued, on what was merged by then. Node proxies
// and waypoints are judged by what they would receive, when dequeued.
func (s *Server) concerned(snap *snapshot.Snapshot, req *model.PushRequest, conns []*xds.Connection) []*xds.Connection {
	if req.Reason[model.ReasonSecret] > 0 || req.Reason[model.ReasonGlobal] > 0 || len(req.ConfigsUpdated) == 0 {
		return conns
	}
	type scopes struct{ prev, cur *scope.SidecarScope }
	// The scopes before, read under the lock; building the current ones
	// (the first of each in a new snapshot) happens outside it, so that
	// connects and disconnects do not wait for it.
	prevs := make([]*scope.SidecarScope, len(conns))
	gone := make([]bool, len(conns))
	s.connsMu.Lock()
	for i, c := range conns {
		if st := s.conns[c]; st != nil {
			prevs[i] = st.prevScope
		} else {
			gone[i] = true
		}
	}
	s.connsMu.Unlock()
	decided := map[scopes]bool{}
	out := conns[:0]
	skipped := 0
	for i, c := range conns {
		if gone[i] {
			continue
		}
		if t := c.Proxy().Type; t == model.Ztunnel || t == model.Waypoint {
			out = append(out, c)
			continue
		}
		k := scopes{prevs[i], snap.Scopes.For(c.Proxy())}
		need, ok := decided[k]
		if !ok {
			need = needsPush(k.prev, k.cur, req)
			decided[k] = need
		}
		if need {
			out = append(out, c)
		} else {
			skipped++
		}
	}
	s.countSkipped(skipped)
	return out
}

// pushConnection is one proxy's push, run under the throttle: skip proxies that
// depend on nothing that changed, else send.
func (s *Server) pushConnection(ctx context.Context, conn *xds.Connection, req *model.PushRequest) {
	snap := s.current.Load()
	cur := snap.Scopes.For(conn.Proxy())
	s.connsMu.Lock()
	st := s.conns[conn]
	if st == nil {
		s.connsMu.Unlock()
		return // gone
	}
	prev := st.prevScope
	st.prevScope = cur
	push := needsPush(prev, cur, req)
	if t := conn.Proxy().Type; t == model.Ztunnel || t == model.Waypoint {
		// Node proxies get the whole mesh and waypoints their Gateway's
		// services, not a Sidecar scope: they need a push when what they
		// would receive changed, whatever the reason (and waypoints on
		// certificate rotation, as every proxy with SDS).
		d, err := contentDigest(snap, conn.Proxy())
		push = err != nil || d != st.digest || (t == model.Waypoint && req.Reason[model.ReasonSecret] > 0)
		st.digest = d
	}
	s.connsMu.Unlock()
	if !push {
		s.countSkipped(1)
		return
	}
	// Convergence is recorded when the push is sent (hooks.PushSent): for
	// a proxy that does not read, Push returns first (xds.ErrPushDeferred).
	if err := s.xds.Push(ctx, conn, req); err != nil {
		s.log.Debug("push not completed", "proxy", conn.Proxy().ID, "err", err)
	}
}

// needsPush applies istiod's filter: a push that is about particular configs
// goes only to proxies whose scope depends on one of them; a global push, or
// one for reasons that concern everyone (secrets, namespaces), goes to all.
func needsPush(prev, cur *scope.SidecarScope, req *model.PushRequest) bool {
	if req.Reason[model.ReasonSecret] > 0 || req.Reason[model.ReasonGlobal] > 0 {
		return true
	}
	return scope.NeedsPush(prev, cur, req.ConfigsUpdated)
}

func (s *Server) connections() []*xds.Connection {
	s.connsMu.Lock()
	defer s.connsMu.Unlock()
	out := make([]*xds.Connection, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

// rotateCertificates re-issues workload certificates at half their life and
// pushes the new secrets.
func (s *Server) rotateCertificates(ctx context.Context) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if due := s.ca.RotateDue(now); len(due) > 0 {
				s.log.Info("workload certificates rotated", "identities", len(due))
				s.inbound(push.InboundConfig, model.NewPushRequest(model.ReasonSecret, true, now))
			}
		}
	}
}
