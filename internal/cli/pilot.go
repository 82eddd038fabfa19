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
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// pilotFlags are meshperf pilot's flags, with istiod's names where istiod has
// them, so that scripts written for one drive the other.
type pilotFlags struct {
	configDir      string
	meshConfig     string
	grpcAddr       string
	secureGRPCAddr string
	httpAddr       string
	monitoringAddr string
	dataDir        string
	domain         string
	logLevel       string
	push           push.Options
	sendTimeout    time.Duration
}

func (f *pilotFlags) define(fs *flag.FlagSet, env push.Options, envSendTimeout time.Duration) {
	fs.StringVar(&f.configDir, "configDir", "", "read config from this directory of YAML files, watched for changes, instead of the embedded store (istiod's file mode)")
	fs.StringVar(&f.configDir, "config-dir", "", "same as --configDir")
	fs.StringVar(&f.meshConfig, "meshConfig", "", "mesh config `file` (Istio's MeshConfig YAML); Istio's defaults when absent")
	fs.StringVar(&f.grpcAddr, "grpcAddr", "127.0.0.1:15010", "plaintext xDS (ADS) `address`")
	fs.StringVar(&f.secureGRPCAddr, "secureGRPCAddr", "", "TLS xDS address (not served yet)")
	fs.StringVar(&f.httpAddr, "httpAddr", "127.0.0.1:8080", "config API and debug endpoints `address`")
	fs.StringVar(&f.monitoringAddr, "monitoringAddr", "127.0.0.1:15014", "/metrics `address`")
	fs.StringVar(&f.dataDir, "dataDir", defaultDataDir(), "`directory` of the embedded store and the CA's root")
	fs.StringVar(&f.domain, "domain", "cluster.local", "DNS domain suffix")
	fs.StringVar(&f.logLevel, "log_output_level", "info", "log `level`: debug, info, warn, error")
	// The knobs' defaults come from istiod's environment variables, so the
	// variables work as in istiod and a flag given explicitly wins.
	fs.DurationVar(&f.push.DebounceAfter, "debounceAfter", env.DebounceAfter, "quiet period that closes a debounce window ("+push.EnvDebounceAfter+")")
	fs.DurationVar(&f.push.DebounceMax, "debounceMax", env.DebounceMax, "longest a debounce window stays open ("+push.EnvDebounceMax+")")
	fs.BoolVar(&f.push.EnableEDSDebounce, "enableEDSDebounce", env.EnableEDSDebounce, "debounce endpoint-only changes too ("+push.EnvEnableEDSDebounce+")")
	fs.IntVar(&f.push.PushThrottle, "pushThrottle", env.PushThrottle, "concurrent pushes; 0 = min(15+5*GOMAXPROCS, 100) ("+push.EnvPushThrottle+")")
	fs.Float64Var(&f.push.MaxRequestsPerSecond, "maxRequestsPerSecond", env.MaxRequestsPerSecond, "new xDS streams per second; 0 = automatic ("+push.EnvMaxRequestsPerSecond+")")
	fs.DurationVar(&f.sendTimeout, "xdsSendTimeout", envSendTimeout, "bound on one xDS send; 0 = none ("+xds.EnvSendTimeout+")")
	f.push.MaxRequestsBurst = env.MaxRequestsBurst
}

func defaultDataDir() string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".meshperf", "pilot")
	}
	return ".meshperf-pilot"
}

// Pilot is `meshperf pilot`: the control plane.
func Pilot(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runPilot(ctx, args, stdout, stderr)
}

func runPilot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env, err := push.OptionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitBadInput
	}
	var sendTimeout time.Duration
	if v := os.Getenv(xds.EnvSendTimeout); v != "" {
		if sendTimeout, err = time.ParseDuration(v); err != nil || sendTimeout < 0 {
			fmt.Fprintf(stderr, "meshperf pilot: %s=%q: want a duration such as 5s\n", xds.EnvSendTimeout, v)
			return exitBadInput
		}
	}
	var f pilotFlags
	fs := flag.NewFlagSet("meshperf pilot", flag.ContinueOnError)
	f.define(fs, env, sendTimeout)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(stdout, fs, "meshperf pilot [flags]", "The control plane: Istio config in, Envoy xDS out, through istiod's debounce/queue/throttle pipeline.")
			return exitOK
		}
		fmt.Fprintf(stderr, "meshperf pilot: %v (see meshperf pilot -h)\n", err)
		return exitBadInput
	}
	if f.secureGRPCAddr != "" {
		fmt.Fprintln(stderr, "meshperf pilot: --secureGRPCAddr is not served yet; use --grpcAddr on loopback")
		return exitBadInput
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: --log_output_level %q: want debug, info, warn or error\n", f.logLevel)
		return exitBadInput
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	mesh, err := config.LoadMeshConfig(f.meshConfig)
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitBadInput
	}
	srv, err := discovery.New(discovery.Options{
		StorePath: filepath.Join(f.dataDir, "config.db"), ConfigDir: f.configDir,
		CADir: filepath.Join(f.dataDir, "ca"), Mesh: mesh, DomainSuffix: f.domain,
		Push: f.push, XDS: xds.Options{SendTimeout: f.sendTimeout}, Logger: log,
	})
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	defer srv.Close()
	return servePilot(ctx, srv, &f, log, stdout, stderr)
}

// servePilot binds the three listeners (all or none) and runs until ctx ends.
func servePilot(ctx context.Context, srv *discovery.Server, f *pilotFlags, log *slog.Logger, stdout, stderr io.Writer) int {
	var listeners []net.Listener
	for _, addr := range []string{f.grpcAddr, f.httpAddr, f.monitoringAddr} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			fmt.Fprintf(stderr, "meshperf pilot: cannot listen on %s: %v\n", addr, err)
			return exitFailed
		}
		listeners = append(listeners, ln)
	}
	g := grpc.NewServer()
	srv.RegisterGRPC(g)
	apiServer := &http.Server{Handler: api.NewHandler(apiDeps(srv, log)), ReadHeaderTimeout: 10 * time.Second}
	mon := http.NewServeMux()
	mon.Handle("/metrics", promhttp.HandlerFor(srv.Metrics(), promhttp.HandlerOpts{}))
	monServer := &http.Server{Handler: mon, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = g.Serve(listeners[0]) }()
	go func() { _ = apiServer.Serve(listeners[1]) }()
	go func() { _ = monServer.Serve(listeners[2]) }()
	fmt.Fprintf(stdout, "meshperf pilot: xDS on %s, API on http://%s, metrics on http://%s/metrics\n",
		listeners[0].Addr(), listeners[1].Addr(), listeners[2].Addr())
	err := srv.Run(ctx)
	g.Stop()
	_ = apiServer.Close()
	_ = monServer.Close()
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	return exitOK
}
