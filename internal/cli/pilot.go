package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/pilot/xds"
)

// pilotFlags are meshperf pilot's flags, with istiod's names where istiod has
// them, so that scripts written for one drive the other.
type pilotFlags struct {
	configDir   string
	meshConfig  string
	listeners   listenerSet
	dataDir     string
	domain      string
	logLevel    string
	readyFile   string
	push        push.Options
	sendTimeout time.Duration
	images      injectImageFlags // the injected sidecars'
	kube        pilotKubeFlags
	// apiToken and allowedHosts guard the HTTP listeners (pilot_http.go).
	apiToken     string
	allowedHosts []string
	// insecureTrustClaimedIdentity serves SDS secrets for the identities
	// proxies claim, and signs for any caller; loopback only.
	insecureTrustClaimedIdentity bool

	// Read from the flags above by parsePilotArgs.
	levels    logLevels
	mesh      *meshconfig.MeshConfig
	injection inject.Options
}

func (f *pilotFlags) define(fs *flag.FlagSet, env push.Options, envSendTimeout time.Duration) {
	fs.StringVar(&f.configDir, "configDir", "", "read config from this directory of YAML files, watched for changes, instead of the embedded store (istiod's file mode)")
	fs.StringVar(&f.configDir, "config-dir", "", "same as --configDir")
	fs.StringVar(&f.meshConfig, "meshConfig", "", "mesh config `file` (Istio's MeshConfig YAML); Istio's defaults when absent")
	f.listeners = pilotListeners()
	f.listeners.define(fs)
	fs.StringVar(&f.dataDir, "dataDir", defaultDataDir(), "`directory` of the embedded store and the CA's root")
	fs.StringVar(&f.domain, "domain", "cluster.local", "DNS domain suffix")
	fs.StringVar(&f.logLevel, "log_output_level", "info", logLevelsUsage())
	fs.StringVar(&f.readyFile, "ready-file", "", "once every listener is bound and the first config snapshot built, write the listeners' addresses to this `file` as JSON (pid and listeners by name: grpc, http, monitoring, secureGRPC, webhook), for a parent that passed port 0")
	// The knobs' defaults come from istiod's environment variables, so the
	// variables work as in istiod and a flag given explicitly wins.
	durationVar(fs, &f.push.DebounceAfter, "debounceAfter", env.DebounceAfter, "quiet period that closes a debounce window ("+push.EnvDebounceAfter+")")
	durationVar(fs, &f.push.DebounceMax, "debounceMax", env.DebounceMax, "longest a debounce window stays open ("+push.EnvDebounceMax+")")
	fs.BoolVar(&f.push.EnableEDSDebounce, "enableEDSDebounce", env.EnableEDSDebounce, "debounce endpoint-only changes too ("+push.EnvEnableEDSDebounce+")")
	countVar(fs, &f.push.PushThrottle, "pushThrottle", env.PushThrottle, "concurrent pushes; 0 = min(15+5*GOMAXPROCS, 100) ("+push.EnvPushThrottle+")")
	rateVar(fs, &f.push.MaxRequestsPerSecond, "maxRequestsPerSecond", env.MaxRequestsPerSecond, "new xDS streams per second; 0 = automatic ("+push.EnvMaxRequestsPerSecond+")")
	durationVar(fs, &f.sendTimeout, "xdsSendTimeout", envSendTimeout, "bound on one xDS send; 0 = none ("+xds.EnvSendTimeout+")")
	f.push.MaxRequestsBurst = env.MaxRequestsBurst
	f.images.define(fs)
	f.kube.define(fs)
	fs.StringVar(&f.apiToken, "api-token", "", "require this `token` (Authorization: Bearer) on the API's writes and on /debug/ of the API and monitoring listeners "+
		"(default $"+api.TokenEnv+", which keeps it off the command line; generated and printed when --httpAddr is not loopback)")
	allowedHostsVar(fs, &f.allowedHosts)
	fs.BoolVar(&f.insecureTrustClaimedIdentity, "insecure-trust-claimed-identity", false,
		"trust the identity a proxy claims in its node metadata: SDS serves its certificate and key, and the CA signs for any caller "+
			"(impersonation included), as for a fleet simulated from one process; refused unless every listener is on loopback")
}

func defaultDataDir() string {
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".meshperf", "pilot")
	}
	return ".meshperf-pilot"
}

// Pilot is `meshperf pilot`: the control plane; `meshperf pilot manifest`
// renders its deployment on Kubernetes.
func Pilot(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "manifest" {
		return PilotManifest(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "token" {
		return PilotToken(args[1:], stdout, stderr)
	}
	return untilSignalled(runPilot, args, stdout, stderr)
}

func runPilot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf pilot", "[flags]", "The control plane: Istio config in, Envoy xDS out, through istiod's debounce/queue/throttle pipeline; "+
		"with --webhookAddr also the sidecar injector (the --image-repo, --tag and --pull-policy images). "+
		"`meshperf pilot manifest` prints its deployment on Kubernetes; `meshperf pilot token` issues a pod's token.")
	f, err := parsePilotArgs(cmd, args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	// Bind every listener first: a bad or busy address must fail before the
	// store and the CA's root are created.
	if err := f.listeners.bind(); err != nil {
		return cmd.exit(stderr, err)
	}
	defer f.listeners.close()
	if f.insecureTrustClaimedIdentity {
		if err := f.listeners.checkLoopback("--insecure-trust-claimed-identity hands any identity's private key to whoever asks"); err != nil {
			return cmd.exit(stderr, inputError{err})
		}
	}
	return runBoundPilot(ctx, f, stdout, stderr)
}

// parsePilotArgs reads the environment's knobs and the flags, and checks
// everything that can be checked without side effects (listeners, log
// levels, the mesh config), so that bad input is refused before anything
// is bound or created.
func parsePilotArgs(cmd *command, args []string, stdout io.Writer) (*pilotFlags, error) {
	env, err := push.OptionsFromEnv(os.Getenv)
	if err != nil {
		return nil, inputError{err}
	}
	var sendTimeout time.Duration
	if v := os.Getenv(xds.EnvSendTimeout); v != "" {
		if sendTimeout, err = time.ParseDuration(v); err != nil || sendTimeout < 0 {
			return nil, inputError{fmt.Errorf("%s=%q: want a duration such as 5s", xds.EnvSendTimeout, v)}
		}
	}
	f := &pilotFlags{}
	f.define(cmd.flags, env, sendTimeout)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return nil, err
	}
	if err := f.listeners.check(); err != nil {
		return nil, inputError{err}
	}
	if f.levels, err = parseLogLevels(f.logLevel); err != nil {
		return nil, inputError{err}
	}
	if f.mesh, err = config.LoadMeshConfig(f.meshConfig); err != nil {
		return nil, inputError{err}
	}
	if f.injection, err = f.images.options(); err != nil {
		return nil, err
	}
	if err := f.kube.parse(f.configDir, os.Getenv); err != nil {
		return nil, err
	}
	if v, ok := os.LookupEnv("AUTOMEMLIMIT"); ok && v != "off" {
		if _, err := parseMemoryLimitRatio(v); err != nil {
			return nil, inputError{err}
		}
	}
	return f, nil
}

// parseMemoryLimitRatio reads AUTOMEMLIMIT, automemlimit's share of the
// cgroup's limit to give the heap.
func parseMemoryLimitRatio(v string) (float64, error) {
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r > 0 && r <= 1) {
		return 0, fmt.Errorf("AUTOMEMLIMIT=%q: want the share of the cgroup's memory limit for the heap, in (0, 1], or off", v)
	}
	return r, nil
}

// runBoundPilot runs the control plane on f's bound listeners until ctx
// ends or a server fails.
func runBoundPilot(ctx context.Context, f *pilotFlags, stdout, stderr io.Writer) int {
	scopeLog := f.levels.loggers(stderr)
	log := scopeLog(defaultScope)
	for _, scope := range f.levels.unknown {
		log.Warn("--log_output_level names a scope meshperf pilot does not have; ignored", "scope", scope, "scopes", strings.Join(pilotLogScopes, ","))
	}
	setMemoryLimit(log, memlimit.FromCgroup)
	logOpenFilesLimit(log)
	if f.insecureTrustClaimedIdentity {
		log.Warn("--insecure-trust-claimed-identity: SDS and the CA give any identity's certificate and key to any local process that claims it; for simulated fleets on this machine only")
	}
	// The cluster is checked before the CA's root is created: a pilot that
	// cannot watch it leaves nothing behind.
	kubeSource, err := f.kube.source(ctx, scopeLog(discovery.ScopeKube))
	if err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	closeSource := func() {
		if kubeSource != nil {
			_ = kubeSource.Close()
		}
	}
	caDir := filepath.Join(f.dataDir, "ca")
	if err := restoreCARoot(ctx, f.kube.rootSecretClient(), caDir); err != nil {
		closeSource()
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	srv, err := discovery.New(discovery.Options{
		Kube:      kubeSource,
		StorePath: filepath.Join(f.dataDir, "config.db"), ConfigDir: f.configDir, ProxiesPath: filepath.Join(f.dataDir, "proxies.json"),
		CADir: caDir, CertificateAuth: certificateAuth(f.kube.client), Mesh: f.mesh, DomainSuffix: f.domain,
		Push: f.push, XDS: xds.Options{SendTimeout: f.sendTimeout}, Logger: log, ScopeLogger: scopeLog,
		InsecureTrustClaimedIdentity: f.insecureTrustClaimedIdentity,
	})
	if err != nil {
		closeSource()
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	defer srv.Close()
	if err := saveCARoot(ctx, f.kube.rootSecretClient(), caDir); err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	if err := servePilot(ctx, srv, f, scopeLog, stdout); err != nil {
		fmt.Fprintf(stderr, "meshperf pilot: %v\n", err)
		return exitFailed
	}
	return exitOK
}

// memoryLimitRatio is the share of the cgroup's memory limit given to the Go
// runtime as GOMEMLIMIT, istiod's: the rest is left for what the runtime
// does not count (stacks in flight, the kernel's socket buffers) so that the
// collector works harder before the kernel kills the process.
const memoryLimitRatio = 0.9

// setMemoryLimit sets GOMEMLIMIT, as istiod does at its start, to
// memoryLimitRatio of the limit that cgroupLimit reads, unless the user set
// GOMEMLIMIT (or AUTOMEMLIMIT=off), and logs the limit in force. It returns
// that limit (math.MaxInt64 when none).
func setMemoryLimit(log *slog.Logger, cgroupLimit memlimit.Provider) int64 {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.Info("memory limit from GOMEMLIMIT", "GOMEMLIMIT", v)
		return debug.SetMemoryLimit(-1)
	}
	ratio := memoryLimitRatio
	switch v, ok := os.LookupEnv("AUTOMEMLIMIT"); {
	case !ok:
	case v == "off":
		log.Info("no memory limit: AUTOMEMLIMIT=off; set GOMEMLIMIT to bound the heap")
		return debug.SetMemoryLimit(-1)
	default:
		// The library reads AUTOMEMLIMIT itself; it is read here too so that
		// the log says the ratio in force. parsePilotArgs checked it.
		ratio, _ = parseMemoryLimitRatio(v)
	}
	limit, err := memlimit.Set(memlimit.WithRatio(ratio), memlimit.WithProvider(cgroupLimit))
	switch {
	case errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
		log.Info("no memory limit: not in a memory cgroup; set GOMEMLIMIT to bound the heap")
	case err != nil:
		log.Warn("no memory limit: the cgroup's could not be read; set GOMEMLIMIT to bound the heap", "error", err)
	case limit == math.MaxInt64:
		log.Info("no memory limit: the cgroup has none; set GOMEMLIMIT to bound the heap")
	default:
		log.Info("memory limit set from the cgroup's", "GOMEMLIMIT", limit, "ratio", ratio)
	}
	return limit
}

// logOpenFilesLimit says how many files pilot may open: every proxy's
// stream holds one, so the limit bounds the proxies one pilot serves.
func logOpenFilesLimit(log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		log.Warn("cannot read the open-files limit", "error", err)
		return
	}
	log.Info("open-files limit: each proxy's xDS stream holds one file", "soft", lim.Cur, "hard", lim.Max)
}
