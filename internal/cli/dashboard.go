package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/dashboard"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// defaultDashboardAddress is loopback: the store may hold what a team
// would not publish, and POSTs start runs (off loopback they need a token).
const defaultDashboardAddress = "127.0.0.1:8088"

// Dashboard runs `meshperf dashboard`: the results store's read-only JSON
// API, until SIGINT or SIGTERM. Exit status: 0 after a clean stop, 1 when
// the address is taken or the database cannot be opened, 2 for bad flags
// or a database path where there is none.
func Dashboard(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(runDashboard, args, stdout, stderr)
}

// dashboardFlags are the flags `meshperf dashboard` acts on.
type dashboardFlags struct {
	db           string
	dataDir      string
	readyFile    string
	token        string
	allowedHosts []string
	listeners    listenerSet
}

func newDashboardCommand(f *dashboardFlags) *command {
	cmd := newCommand("meshperf dashboard", "[flags]",
		"Serves the results store (lab, load and cpload runs) over HTTP: pages to browse, compare and follow\n"+
			"the runs, and a JSON API under /api/ for runs, a run's records and CSV, compare's report and\n"+
			"history's analysis; and the live progress of runs started with --dashboard or from its /live page.\n"+
			"GET /api/ lists the endpoints and docs/dashboard.md describes them. Binds loopback unless -listen\n"+
			"says otherwise; elsewhere POSTs need the token. Answers only to its own names (-allowed-hosts), and\n"+
			"takes POSTs only as JSON and not from another site's pages.")
	fs := cmd.flags
	fs.StringVar(&f.db, "db", filepath.Join("results", "meshperf.db"), "results database: a `path` (must exist: it is not created), sqlite:PATH, or a postgres:// URL")
	f.listeners = listenerSet{{name: listenerHTTP, flag: "listen", def: defaultDashboardAddress, required: true,
		usage: "the API's `address`, host:port (port 0 picks a free one)"}}
	f.listeners.define(fs)
	fs.StringVar(&f.dataDir, "data-dir", "", "also list and draw the Fortio JSON result files in this `directory` (Fortio's own, meshperf load's, Nighthawk's), read on each request, at /fortio/")
	fs.StringVar(&f.token, "token", "", "require this `token` (Authorization: Bearer) on every POST: publishing progress and starting runs (default $"+live.TokenEnv+"; generated and printed when -listen is not loopback)")
	allowedHostsVar(fs, &f.allowedHosts)
	fs.StringVar(&f.readyFile, "ready-file", "", "once the API listens, write its address to this `file` as JSON (pid and listeners by name: http), for a parent that passed port 0")
	return cmd
}

// runDashboard is Dashboard with the stop signal passed in, so tests can
// stop it.
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f dashboardFlags
	cmd := newDashboardCommand(&f)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := f.listeners.check(); err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if err := checkStoreExists(f.db); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := checkDataDir(f.dataDir); err != nil {
		return cmd.exit(stderr, err)
	}
	// A database that exists but cannot be opened (not one, or a schema
	// newer than this binary) is a failure, not a typo: exit 1.
	st, err := openStore(f.db)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer st.Close()
	if err := f.listeners.bind(); err != nil {
		return cmd.exit(stderr, err)
	}
	defer f.listeners.close()
	return cmd.exit(stderr, serveDashboard(ctx, st, &f, stderr, stdout))
}

// serveDashboard serves the API on the bound listener until ctx ends or
// the server fails.
func serveDashboard(ctx context.Context, st *results.Store, f *dashboardFlags, stderr, stdout io.Writer) error {
	ln := f.listeners.get(listenerHTTP)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	token, generated, err := serverToken(f.token, os.Getenv(live.TokenEnv), ln.Addr())
	if err != nil {
		return fmt.Errorf("the dashboard's token: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the meshperf binary (to start lab runs): %w", err)
	}
	// A run started here writes its output beside a SQLite store, or
	// under ./results for a PostgreSQL one (the lab's own default).
	outRoot := filepath.Join("results", "lab")
	if loc, err := results.ParseLocation(f.db); err == nil && loc.IsFile() {
		outRoot = filepath.Join(filepath.Dir(loc.File), "lab")
	}
	labs := dashboard.NewLabRunner(dashboard.LabRunConfig{Executable: exe, DB: f.db,
		OutRoot: outRoot, SelfURL: selfURL(ln.Addr()), Token: token, Log: log})
	defer labs.Stop()
	opts := []dashboard.Option{dashboard.WithToken(token), dashboard.WithLabRunner(labs),
		dashboard.WithAllowedHosts(f.listeners.given(listenerHTTP), f.allowedHosts)}
	if f.dataDir != "" {
		opts = append(opts, dashboard.WithDataDir(f.dataDir))
	}
	srv := &http.Server{
		Handler:           dashboard.New(st, log, opts...),
		ReadHeaderTimeout: 10 * time.Second,
		// Requests end with the dashboard: event streams would otherwise
		// hold Shutdown up until their sessions end.
		BaseContext: func(net.Listener) context.Context { return ctx },
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "meshperf dashboard: API on http://%s/ (results database %s)\n", ln.Addr(), st)
	if generated {
		fmt.Fprintf(stdout, "meshperf dashboard: not on loopback, so POSTs need this token (Authorization: Bearer, or --dashboard-token): %s\n", token)
	}
	removeReady, err := writeReadyFile(f.readyFile, f.listeners.ready())
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer removeReady()
	select {
	case err := <-served:
		return fmt.Errorf("the API on %s stopped: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	// Let requests in flight finish, but not hold the stop up for long.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("while stopping: %w", err)
	}
	return nil
}

// checkDataDir refuses a -data-dir that is not a directory: a typo would
// otherwise show an empty list.
func checkDataDir(dir string) error {
	if dir == "" {
		return nil
	}
	info, err := os.Stat(dir)
	switch {
	case err != nil:
		return inputError{fmt.Errorf("data directory %s: %w (-data-dir names the directory of Fortio JSON results)", dir, errors.Unwrap(err))}
	case !info.IsDir():
		return inputError{fmt.Errorf("data directory %s: not a directory (-data-dir names the directory of Fortio JSON results)", dir)}
	}
	return nil
}

// selfURL is how a run the dashboard starts reaches it: over loopback
// when it listens on every address.
func selfURL(addr net.Addr) string {
	a, ok := addr.(*net.TCPAddr)
	if !ok {
		return "http://" + addr.String()
	}
	ip := a.IP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
		if a.IP.To4() == nil {
			ip = net.IPv6loopback
		}
	}
	return "http://" + net.JoinHostPort(ip.String(), strconv.Itoa(a.Port))
}
