package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/proc"
)

// disabled is Fortio's port value for "do not start this server".
const disabled = "disabled"

// Server runs `meshperf server`: the echo servers every benchmark targets,
// taking Fortio's server flags so that scripts written for `fortio server`
// work unchanged. It serves until SIGINT or SIGTERM and returns the exit
// status: 0 after a clean stop, 1 if a listener cannot start, 2 for bad flags.
func Server(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(runServer, args, stdout, stderr)
}

// serverFlags are the flags `meshperf server` acts on.
type serverFlags struct {
	httpPort, grpcPort, tcpPort string
	cert, key                   string
	maxDelay                    time.Duration
	maxPayloadKB                int
	debugPath                   string
	healthService               string
	grpcMaxStreams              uint
	idleTimeout                 time.Duration
	logLevel                    string
	quiet                       bool
	readyFile                   string
}

// ignoredStringFlags and ignoredBoolFlags are Fortio server flags for
// features meshperf server does not have (web UI, UDP echo, redirector,
// TLS, proxies, dynamic flags). They are accepted so that Fortio command
// lines run, and each one given draws a notice.
var (
	ignoredStringFlags = []string{
		"redirect-port", "udp-port", "ui-path", "data-dir", "static-dir", "sync",
		"sync-interval", "base-url", "cacert", "echo-server-default-params",
		"config-dir", "config-port", "gomaxprocs", "profile", "P", "M", "resolve-ip-type",
		"dns-method",
	}
	ignoredBoolFlags = []string{
		"udp-async", "mtls", "pprof", "logger-json", "logger-file-line",
		"logger-goroutine", "logger-timestamp", "logger-no-color", "logger-force-color",
		"multi-mirror-origin", "multi-serial-mode", "proxy-all-headers",
	}
)

// newServerCommand is meshperf server's command line, its flags bound to f.
func newServerCommand(f *serverFlags) *command {
	cmd := newCommand("meshperf server", "[flags]", "The echo server: HTTP/1.1 and h2c (HTTPS with -cert/-key), TCP echo, gRPC health and ping, with Fortio's flags.")
	fs := cmd.flags
	addrVar(fs, &f.httpPort, "http-port", "8080", fortioPort,
		"HTTP echo `port`: port (all interfaces), host:port, /unix/socket/path or \"disabled\"")
	addrVar(fs, &f.grpcPort, "grpc-port", "8079", fortioPort,
		"gRPC health + ping `port`: port, host:port, /unix/socket/path or \"disabled\"")
	addrVar(fs, &f.tcpPort, "tcp-port", "8078", fortioPort,
		"TCP echo `port`: port, host:port, /unix/socket/path or \"disabled\"")
	durationVar(fs, &f.maxDelay, "max-echo-delay", echo.DefaultMaxDelay,
		"cap for the delay= echo parameter and gRPC ping delay")
	intVar(fs, &f.maxPayloadKB, "maxpayloadsizekb", echo.DefaultMaxPayloadBytes/1024, 0, 1<<20,
		"cap for the size= echo parameter, in `KiB`")
	fs.StringVar(&f.debugPath, "echo-debug-path", echo.DefaultDebugPath,
		"`path` answering with a dump of the request; empty turns it off")
	fs.StringVar(&f.healthService, "healthservice", "",
		"gRPC health service `name` reported SERVING besides \"\" (default \"ping\")")
	intVar(fs, &f.grpcMaxStreams, "grpc-max-streams", 0, 0, 1<<32-1,
		"gRPC server MaxConcurrentStreams; 0 leaves gRPC's default")
	durationVar(fs, &f.idleTimeout, "server-idle-timeout", echo.DefaultIdleTimeout,
		"HTTP keep-alive idle and header read timeout")
	fs.StringVar(&f.logLevel, "loglevel", "Info",
		"log `level`: Debug, Verbose, Info, Warning, Error, Critical or Fatal")
	fs.BoolVar(&f.quiet, "quiet", false, "log errors only (same as -loglevel Error)")
	fs.StringVar(&f.cert, "cert", "", "serve HTTPS (HTTP/1.1 and HTTP/2 by ALPN) with this PEM certificate `file`")
	fs.StringVar(&f.key, "key", "", "the PEM private key `file` for -cert")
	fs.StringVar(&f.readyFile, "ready-file", "", "once every listener is bound, write their addresses to this `file` as JSON (pid and listeners by name: http, grpc, tcp), for a parent that passed port 0")
	for _, name := range ignoredStringFlags {
		fs.String(name, "", ignoredFlagUsage)
	}
	for _, name := range ignoredBoolFlags {
		fs.Bool(name, false, ignoredFlagUsage)
	}
	return cmd
}

// runServer is Server with the stop signal passed in, so tests can stop it.
func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f serverFlags
	cmd := newServerCommand(&f)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	cfg, err := f.config(cmd.flags, stderr)
	if err != nil {
		return cmd.exit(stderr, usageError{err.Error()})
	}
	srv := echo.New(cfg)
	if err := srv.Start(); err != nil {
		return cmd.exit(stderr, fmt.Errorf("cannot start: %w (pick another port, or \"disabled\")", err))
	}
	ready := proc.Ready{PID: os.Getpid(), Listeners: map[string]string{}}
	for _, l := range []struct{ name, what, addr string }{
		{"http", httpKind(cfg), srv.HTTPAddr()},
		{"tcp", "TCP echo", srv.TCPAddr()},
		{"grpc", "gRPC health + ping", srv.GRPCAddr()},
	} {
		if l.addr != "" {
			_, _ = fmt.Fprintf(stdout, "meshperf server: %s on %s\n", l.what, l.addr)
			ready.Listeners[l.name] = l.addr
		}
	}
	removeReady, err := writeReadyFile(f.readyFile, ready)
	if err != nil {
		_ = srv.Close()
		return cmd.exit(stderr, err)
	}
	defer removeReady()
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		return cmd.exit(stderr, fmt.Errorf("while stopping: %w", err))
	}
	return exitOK
}

// config checks the parsed flags and turns them into an echo.Config,
// printing one notice per ignored Fortio flag that was given.
func (f *serverFlags) config(fs *flag.FlagSet, stderr io.Writer) (echo.Config, error) {
	level, err := parseLogLevel(f.logLevel)
	if err != nil {
		return echo.Config{}, err
	}
	if f.quiet {
		level = slog.LevelError
	}
	ignored := make(map[string]bool)
	for _, n := range ignoredStringFlags {
		ignored[n] = true
	}
	for _, n := range ignoredBoolFlags {
		ignored[n] = true
	}
	fs.Visit(func(fl *flag.Flag) {
		if ignored[fl.Name] {
			_, _ = fmt.Fprintf(stderr, "meshperf server: ignoring Fortio flag -%s (no such feature here)\n", fl.Name)
		}
	})
	cfg := echo.Config{
		HTTPAddr:        portAddr(f.httpPort),
		TCPAddr:         portAddr(f.tcpPort),
		GRPCAddr:        portAddr(f.grpcPort),
		MaxDelay:        f.maxDelay,
		MaxPayloadBytes: f.maxPayloadKB * 1024,
		Logger:          slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
		IdleTimeout:     f.idleTimeout,
		DebugPath:       f.debugPath,
		DisableDebug:    f.debugPath == "",
		HealthService:   f.healthService,
		GRPCMaxStreams:  uint32(f.grpcMaxStreams),
		TLSCert:         f.cert,
		TLSKey:          f.key,
	}
	if (f.cert == "") != (f.key == "") {
		return echo.Config{}, errors.New("-cert and -key go together")
	}
	if f.maxDelay == 0 {
		cfg.MaxDelay = -1 // echo.Config's 0 means "default"; the flag's 0 means no delays
	}
	if f.maxPayloadKB == 0 {
		cfg.MaxPayloadBytes = -1 // likewise: size= gives empty bodies
	}
	return cfg, nil
}

// portAddr maps Fortio's "disabled" (and an empty value) to "off".
func portAddr(p string) string {
	if p == disabled {
		return ""
	}
	return p
}

// parseLogLevel maps Fortio's log level names onto slog's.
func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug", "verbose":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warning", "warn":
		return slog.LevelWarn, nil
	case "error", "critical", "fatal":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("-loglevel %q: want Debug, Verbose, Info, Warning, Error, Critical or Fatal", s)
}

func httpKind(cfg echo.Config) string {
	if cfg.TLSCert != "" {
		return "HTTPS echo (HTTP/1.1 + h2 by ALPN)"
	}
	return "HTTP echo (HTTP/1.1 + h2c)"
}
