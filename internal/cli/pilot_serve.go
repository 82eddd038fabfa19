package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meshperf/meshperf/internal/netutil"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/proc"
)

// namedListener is one of pilot's servers' addresses: the flag that sets it,
// the name its ready file gives it, and whether it may be off.
type namedListener struct {
	name     string // in the ready file
	flag     string
	addr     string
	def      string // the default, also the example an error quotes
	required bool
	// barePort lets the flag take a port alone for all interfaces, as
	// Fortio's servers, the Acmeair services and isotope's (-port 8080) take it.
	barePort bool
	usage    string
	ln       net.Listener // once bound
}

// listenerSet is every listener of a server, bound together before anything
// is served.
type listenerSet []*namedListener

// The names pilot's ready file gives its listeners.
const (
	listenerGRPC       = "grpc"
	listenerHTTP       = "http"
	listenerMonitoring = "monitoring"
	listenerSecureGRPC = "secureGRPC"
	listenerWebhook    = "webhook"
)

// pilotListeners are meshperf pilot's listeners with istiod's flag names.
// The API's default is not istiod's :8080, which `meshperf server` (as
// Fortio's) takes by default: the two run side by side in the lab.
func pilotListeners() listenerSet {
	return listenerSet{
		{name: listenerGRPC, flag: "grpcAddr", def: "127.0.0.1:15010", required: true, usage: "plaintext xDS (ADS) `address`"},
		{name: listenerHTTP, flag: "httpAddr", def: api.DefaultAddress, required: true, usage: "config API and debug endpoints `address`"},
		{name: listenerMonitoring, flag: "monitoringAddr", def: "127.0.0.1:15014", required: true, usage: "/metrics `address`"},
		{name: listenerSecureGRPC, flag: "secureGRPCAddr", usage: "TLS xDS and certificate API `address` (istiod's 15012 role: ADS, and CreateCertificate for node proxies), with a serving certificate from the built-in CA for istiod's names; off when empty"},
		{name: listenerWebhook, flag: "webhookAddr", usage: "sidecar injection webhook `address` (HTTPS, /inject; istiod's 15017), with a serving certificate from the built-in CA for the pilot's Service, meshperf-pilot.NAMESPACE.svc (POD_NAMESPACE, default meshperf-system); off when empty"},
	}
}

// define registers the listeners' flags. Every one takes an empty value at
// parse time, so that check can say which one is required with an example.
func (s listenerSet) define(fs *flag.FlagSet) {
	for _, l := range s {
		form := optionalHostPort
		form.barePort = l.barePort
		addrVar(fs, &l.addr, l.flag, l.def, form, l.usage)
	}
}

// check refuses an empty required address.
func (s listenerSet) check() error {
	for _, l := range s {
		if l.required && l.addr == "" {
			return fmt.Errorf("--%s: an address is required, e.g. %s", l.flag, l.def)
		}
	}
	return nil
}

// bind listens on every address given, or on none.
func (s listenerSet) bind() error {
	for _, l := range s {
		if l.addr == "" {
			continue
		}
		addr := l.addr
		if l.barePort && !strings.Contains(addr, ":") {
			addr = ":" + addr
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			s.close()
			return fmt.Errorf("--%s: cannot listen on %s: %w", l.flag, l.addr, err)
		}
		l.ln = ln
	}
	return nil
}

// checkLoopback refuses any bound listener that other hosts can reach,
// saying why (what) and which flag to change.
func (s listenerSet) checkLoopback(what string) error {
	for _, l := range s {
		if l.ln == nil {
			continue
		}
		if tcp, ok := l.ln.Addr().(*net.TCPAddr); ok && !tcp.IP.IsLoopback() {
			return fmt.Errorf("%s, so it is refused with --%s %s off loopback: bind every listener to 127.0.0.1 or ::1, or drop the flag and give proxies tokens (meshperf pilot token)",
				what, l.flag, l.addr)
		}
	}
	return nil
}

func (s listenerSet) close() {
	for _, l := range s {
		if l.ln != nil {
			l.ln.Close()
		}
	}
}

// get is the named listener (nil when not bound).
func (s listenerSet) get(name string) net.Listener {
	for _, l := range s {
		if l.name == name {
			return l.ln
		}
	}
	return nil
}

// given is the named listener's address as the flag gave it (a name stays
// a name), "" when there is none.
func (s listenerSet) given(name string) string {
	for _, l := range s {
		if l.name == name {
			return l.addr
		}
	}
	return ""
}

// ready is what the ready file says: every bound listener's address.
func (s listenerSet) ready() proc.Ready {
	r := proc.Ready{PID: os.Getpid(), Listeners: map[string]string{}}
	for _, l := range s {
		if l.ln != nil {
			r.Listeners[l.name] = l.ln.Addr().String()
		}
	}
	return r
}

// xdsStopGrace bounds how long pilot waits at shutdown for gRPC to close its
// xDS connections. grpc.Server.Stop closes them one after another, each
// close waiting for the connection's reader to be scheduled: on two busy
// vCPUs, 2,000 of 6,000 connections were still open 1.5 s after SIGTERM.
// Past the grace pilot exits anyway, and the kernel closes what is left at
// once; the proxies reconnect elsewhere either way.
const xdsStopGrace = 2 * time.Second

// servePilot serves on the bound listeners (xDS, API, metrics, and TLS xDS
// when bound) and runs the control plane until ctx ends. The servers and
// the pipeline run as one group: if any server stops with an error, the
// rest stop too and the error is returned, so that pilot exits with the
// reason instead of running on without, say, its API.
func servePilot(ctx context.Context, srv *discovery.Server, f *pilotFlags, scopeLog func(string) *slog.Logger, stdout io.Writer) error {
	ls := f.listeners
	// Connections refused before a call (not gRPC, a failed TLS handshake)
	// are logged, rate limited: gRPC itself says nothing a user would see.
	refusedConns := netutil.NewLogLimiter(scopeLog(defaultScope), netutil.DefaultLogInterval)
	xdsServer := grpc.NewServer(append(srv.GRPCServerOptions(),
		grpc.Creds(netutil.ReportFailedConnections(insecure.NewCredentials(), refusedConns)))...)
	srv.RegisterGRPC(xdsServer)
	if ln := ls.get(listenerGRPC); !isLoopback(ln.Addr()) {
		// istiod's 15010 is the same: reachable, it registers whoever
		// connects by what the node claims. Say so once, not per client.
		scopeLog(defaultScope).Warn("plaintext xDS is not on loopback: a client that reaches it registers a workload by what its node claims "+
			"(validated, but not proven: without a token it gets no keys, and a proxy that sends one is bound to it); "+
			"keep --grpcAddr on loopback or on a network only your proxies reach", "address", ln.Addr().String())
	}
	web, err := newPilotHTTP(srv, f, scopeLog)
	if err != nil {
		return err
	}
	apiServer, monServer := web.api, web.monitoring
	var secureServer *grpc.Server
	if ls.get(listenerSecureGRPC) != nil {
		cfg, err := srv.ServingTLS(secureServingNames(f)...)
		if err != nil {
			return fmt.Errorf("TLS xDS: %w", err)
		}
		secureServer = grpc.NewServer(append(srv.GRPCServerOptions(),
			grpc.Creds(netutil.ReportFailedConnections(credentials.NewTLS(cfg), refusedConns)))...)
		srv.RegisterSecureGRPC(secureServer)
	}
	webhookServer, err := injectionWebhook(srv, f, scopeLog(injectScope))
	if err != nil {
		return err
	}

	acceptErrors, err := netutil.NewAcceptErrors(srv.Metrics(), "pilot_xds_accept_errors_total",
		"xDS connections the listeners failed to accept, by reason (too_many_open_files: the process's open-files limit)",
		scopeLog(defaultScope), "raise the open-files limit (ulimit -n) or spread proxies over replicas")
	if err != nil {
		return err
	}
	// Closed when the xDS servers' Stop outlasts xdsStopGrace: their Serve,
	// which returns only once Stop has closed every connection, is then
	// left behind so that pilot exits.
	abandonXDS := make(chan struct{})
	serveXDS := func(s *grpc.Server) func(net.Listener) error {
		return func(ln net.Listener) error {
			served := make(chan error, 1)
			go func() { served <- s.Serve(acceptErrors.Wrap(ln)) }()
			select {
			case err := <-served:
				return err
			case <-abandonXDS:
				return nil
			}
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, gctx := errgroup.WithContext(ctx)
	serve := func(what, name string, run func(net.Listener) error) {
		ln := ls.get(name)
		g.Go(func() error {
			err := run(ln)
			if err == nil || errors.Is(err, http.ErrServerClosed) || errors.Is(err, grpc.ErrServerStopped) || gctx.Err() != nil {
				return nil // stopped below
			}
			return fmt.Errorf("%s on %s stopped: %w", what, ln.Addr(), err)
		})
	}
	serve("xDS", listenerGRPC, serveXDS(xdsServer))
	serve("the API", listenerHTTP, apiServer.Serve)
	serve("metrics", listenerMonitoring, monServer.Serve)
	if secureServer != nil {
		serve("TLS xDS", listenerSecureGRPC, serveXDS(secureServer))
	}
	if webhookServer != nil {
		serve("the injection webhook", listenerWebhook, func(ln net.Listener) error { return webhookServer.ServeTLS(ln, "", "") })
		runCABundlePatcher(gctx, g, srv, f, scopeLog(injectScope))
	}
	runRootPublisher(gctx, g, srv, f, scopeLog(defaultScope))
	runWaypointDeployer(gctx, g, f, scopeLog(discovery.ScopeKube))
	g.Go(func() error { return srv.Run(gctx) })
	g.Go(func() error {
		<-gctx.Done()
		xdsStopped := make(chan struct{})
		go func() {
			xdsServer.Stop()
			if secureServer != nil {
				secureServer.Stop()
			}
			close(xdsStopped)
		}()
		select {
		case <-xdsStopped:
		case <-time.After(xdsStopGrace):
			scopeLog(defaultScope).Info("xDS connections still closing at the end of the grace; exiting, the kernel closes the rest", "grace", xdsStopGrace)
			close(abandonXDS)
		}
		_ = apiServer.Close()
		_ = monServer.Close()
		if webhookServer != nil {
			_ = webhookServer.Close()
		}
		return nil
	})

	// Ready means served: until Run has built the first snapshot, xDS
	// streams are refused, and a parent that connected its proxies at once
	// would only see them retry.
	select {
	case <-srv.Serving():
	case <-gctx.Done():
		return g.Wait()
	}
	fmt.Fprintf(stdout, "meshperf pilot: xDS on %s, API on http://%s, metrics on http://%s/metrics\n",
		ls.get(listenerGRPC).Addr(), ls.get(listenerHTTP).Addr(), ls.get(listenerMonitoring).Addr())
	web.announce(stdout)
	if secureServer != nil {
		fmt.Fprintf(stdout, "meshperf pilot: TLS xDS on %s (root certificate: %s)\n", ls.get(listenerSecureGRPC).Addr(), filepath.Join(f.dataDir, "ca", "root-cert.pem"))
	}
	removeReady, err := writeReadyFile(f.readyFile, ls.ready())
	if err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	defer removeReady()
	return g.Wait()
}

// writeReadyFile writes a server's ready file, if path names one, and
// returns what removes it when the server stops: a file that outlived the
// process would say it listens where nothing does (a SIGKILL leaves it;
// the supervisor removes it before the next start, see proc.Spec.ReadyFile).
func writeReadyFile(path string, r proc.Ready) (remove func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if err := proc.WriteReady(path, r); err != nil {
		return nil, err
	}
	return func() { _ = os.Remove(path) }, nil
}
