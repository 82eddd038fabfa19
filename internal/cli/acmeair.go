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
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/acmeair"
	"github.com/meshperf/meshperf/internal/hosts"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// Acmeair is `meshperf acmeair SUBCOMMAND`: the Acmeair-like airline app's
// services and BluePerf's driver for it.
func Acmeair(args []string, stdout, stderr io.Writer) int {
	group := commandGroup{
		name:  "meshperf acmeair",
		about: "An Acmeair-like airline app (auth, customer, flight, booking, main) and BluePerf's driver; docs/acmeair.md.",
		subs: []subcommand{
			{name: "serve", about: "serve one of the app's services (HTTP/1.1 JSON, SQLite)",
				run: func(args []string) int { return untilSignalled(runAcmeairServe, args, stdout, stderr) }},
			{name: "drive", about: "play BluePerf's JMeter mix against the services; per-transaction latency",
				run: func(args []string) int { return untilSignalled(runAcmeairDrive, args, stdout, stderr) }},
			{name: "run", about: "run the app in the lab (meshperf lab run acmeair): one pod per service, the driver, each mode",
				run: func(args []string) int { return acmeairRun(args, stdout, stderr) }},
		},
	}
	return group.run(args, stdout, stderr)
}

// acmeairServeFlags are meshperf acmeair serve's flags.
type acmeairServeFlags struct {
	service       string
	listeners     listenerSet
	dataDir       string
	jwtKeyFile    string
	hostsFile     string
	readyFile     string
	customers     int
	customerURL   string
	flightURL     string
	rewardTimeout time.Duration
}

func newAcmeairServeCommand(f *acmeairServeFlags) *command {
	cmd := newCommand("meshperf acmeair serve", "-service NAME -data-dir DIR -jwt-key-file FILE [flags]",
		"Serves one service of the Acmeair-like app until SIGINT or SIGTERM, its data in SQLite under -data-dir,\n"+
			"loaded with Acmeair's data set when empty. Peers are reached by name (http://customer:8080 ...),\n"+
			"through -hosts when given, or at the -*-url flags.")
	fs := cmd.flags
	fs.StringVar(&f.service, "service", "", "the `service`: "+strings.Join(acmeair.Services, ", "))
	f.listeners = listenerSet{{name: listenerHTTP, flag: "port", def: fmt.Sprint(acmeair.DefaultPort), required: true,
		barePort: true, usage: "listen `address`: a port (all interfaces) or host:port (port 0 picks a free one)"}}
	f.listeners.define(fs)
	fs.StringVar(&f.dataDir, "data-dir", "", "`directory` of the service's SQLite database (created if needed)")
	fs.StringVar(&f.jwtKeyFile, "jwt-key-file", "", "`file` holding the HS256 key every service shares (16 bytes or more)")
	fs.StringVar(&f.hostsFile, "hosts", "", "resolve the peers' names from this hosts `file` first (the lab's)")
	fs.StringVar(&f.readyFile, "ready-file", "", "once listening, write the address to this `file` as JSON (pid and listeners by name: http), for a parent that passed port 0")
	intVar(fs, &f.customers, "customers", acmeair.DefaultCustomers, 1, 10_000_000, "customers loaded into an empty customer database")
	urlVar(fs, &f.customerURL, "customer-url", "the customer service's base `URL` (default "+acmeair.DefaultURL(acmeair.ServiceCustomer)+")")
	urlVar(fs, &f.flightURL, "flight-url", "the flight service's base `URL` (default "+acmeair.DefaultURL(acmeair.ServiceFlight)+")")
	durationVar(fs, &f.rewardTimeout, "reward-timeout", acmeair.DefaultRewardTimeout, "booking: how long a reward-miles update may take before it counts as failed")
	return cmd
}

func runAcmeairServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f acmeairServeFlags
	cmd := newAcmeairServeCommand(&f)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := f.listeners.check(); err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	cfg, err := f.config(stderr)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if err := f.listeners.bind(); err != nil {
		return cmd.exit(stderr, err)
	}
	defer f.listeners.close()
	svc, err := acmeair.New(ctx, cfg)
	if err != nil {
		return cmd.exit(stderr, fmt.Errorf("start %s: %w", cfg.Service, err))
	}
	err = serveAcmeair(ctx, svc, f.listeners, f.readyFile, stdout)
	return cmd.exit(stderr, errors.Join(err, svc.Close()))
}

// config checks the flags and reads the files they name, before anything
// starts.
func (f *acmeairServeFlags) config(stderr io.Writer) (acmeair.Config, error) {
	cfg := acmeair.Config{Service: f.service, DataDir: f.dataDir, Customers: f.customers,
		CustomerURL: f.customerURL, FlightURL: f.flightURL, RewardTimeout: f.rewardTimeout,
		Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	switch {
	case f.service == "":
		return cfg, usagef("-service is required: one of %s", strings.Join(acmeair.Services, ", "))
	case !slices.Contains(acmeair.Services, f.service):
		return cfg, usagef("-service %q: want one of %s", f.service, strings.Join(acmeair.Services, ", "))
	case f.rewardTimeout <= 0:
		return cfg, usagef("-reward-timeout must be more than 0")
	}
	if f.service == acmeair.ServiceMain {
		return cfg, nil
	}
	if f.dataDir == "" && f.service != acmeair.ServiceAuth {
		return cfg, usagef("-data-dir is required for %s", f.service)
	}
	if f.jwtKeyFile == "" {
		return cfg, usagef("-jwt-key-file is required for %s", f.service)
	}
	key, err := acmeair.ReadJWTKey(f.jwtKeyFile)
	if err != nil {
		return cfg, inputError{err}
	}
	cfg.JWTKey = key
	dial, err := hostsDialer(f.hostsFile)
	if err != nil {
		return cfg, err
	}
	cfg.Dial = dial
	return cfg, nil
}

// hostsDialer is the dialler that resolves names from the hosts file, nil
// without one.
func hostsDialer(path string) (func(context.Context, string, string) (net.Conn, error), error) {
	if path == "" {
		return nil, nil
	}
	t, err := hosts.Load(path)
	if err != nil {
		return nil, inputError{err}
	}
	return t.Dialer(&net.Dialer{Timeout: 5 * time.Second}), nil
}

// serveAcmeair serves svc on the bound listener until ctx ends.
func serveAcmeair(ctx context.Context, svc *acmeair.Service, ls listenerSet, readyFile string, stdout io.Writer) error {
	ln := ls.get(listenerHTTP)
	srv := &http.Server{Handler: svc.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	removeReady, err := writeReadyFile(readyFile, ls.ready())
	if err != nil {
		_ = srv.Close()
		return err
	}
	defer removeReady()
	_, _ = fmt.Fprintf(stdout, "meshperf acmeair: %s on %s\n", svc.Name(), ln.Addr())
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// acmeairDriveFlags are meshperf acmeair drive's flags.
type acmeairDriveFlags struct {
	users, userIDs, iterations   int
	duration                     time.Duration
	hostsFile                    string
	auth, customer, flight, book string
	jsonPath                     string
}

func newAcmeairDriveCommand(f *acmeairDriveFlags) *command {
	cmd := newCommand("meshperf acmeair drive", "[flags]",
		"Plays BluePerf's JMeter mix against the app: each user logs in as a random customer, then five times\n"+
			"views and updates the profile (25%), queries flights 5 times, books what the last query found, lists\n"+
			"the bookings and cancels those beyond the first two (25%); no think time. Ends with a table per\n"+
			"transaction; -json writes a Fortio-compatible result with the transactions' figures.")
	fs := cmd.flags
	intVar(fs, &f.users, "users", acmeair.DefaultUsers, 1, 100_000, "concurrent users (the JMeter threads)")
	intVar(fs, &f.userIDs, "user-ids", acmeair.DefaultUserIDs, 1, 10_000_000, "log in as customers uid0 .. uid(N-1)")
	durationVar(fs, &f.duration, "duration", acmeair.DefaultDuration, "how long to run")
	intVar(fs, &f.iterations, "iterations", 0, 0, 1<<31-1, "end each user after this many iterations (login and five rounds); 0: no cap")
	fs.StringVar(&f.hostsFile, "hosts", "", "resolve the services' names from this hosts `file` first (the lab's)")
	for _, u := range []struct {
		p       *string
		service string
	}{{&f.auth, acmeair.ServiceAuth}, {&f.customer, acmeair.ServiceCustomer}, {&f.flight, acmeair.ServiceFlight}, {&f.book, acmeair.ServiceBooking}} {
		urlVar(fs, u.p, u.service, "the "+u.service+" service's base `URL` (default "+acmeair.DefaultURL(u.service)+")")
	}
	fs.StringVar(&f.jsonPath, "json", "", "write the JSON result to this `file` (- for standard output)")
	return cmd
}

func runAcmeairDrive(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f acmeairDriveFlags
	cmd := newAcmeairDriveCommand(&f)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if f.duration <= 0 {
		return cmd.exit(stderr, usagef("-duration must be more than 0"))
	}
	dial, err := hostsDialer(f.hostsFile)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	r, err := acmeair.Drive(ctx, acmeair.DriverConfig{Users: f.users, UserIDs: f.userIDs, Duration: f.duration,
		Iterations: f.iterations, AuthURL: f.auth, CustomerURL: f.customer, FlightURL: f.flight, BookingURL: f.book,
		Dial: dial})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	table := stdout
	if f.jsonPath == "-" {
		table = stderr
	}
	if err := r.WriteTable(table); err != nil {
		return cmd.exit(stderr, err)
	}
	if f.jsonPath != "" {
		if err := writeJSON(f.jsonPath, r, stdout); err != nil {
			return cmd.exit(stderr, err)
		}
	}
	// Errors are figures of the run, as in a load result; a run in which
	// nothing worked measured nothing.
	if r.DurationHistogram.Count == r.ErrorsDurationHistogram.Count {
		return cmd.exit(stderr, fmt.Errorf("none of %d calls succeeded: are the services up at the URLs given?", r.DurationHistogram.Count))
	}
	return exitOK
}

// acmeairRun is `meshperf acmeair run`: `meshperf lab run acmeair` with
// the app's own words for its flags (-users for the driver's users, the
// lab's connections) and the lab's flags that apply to it.
func acmeairRun(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf acmeair run", "[flags]",
		"Runs the Acmeair-like app in the lab (as root): one pod per service, BluePerf's driver in a client pod,\n"+
			"in each mode; the shipped scenario acmeair, which the flags override. Same as meshperf lab run acmeair.")
	var publish publishFlags
	cfg, err := parseLabRun(cmd, args, stdout, labRunOptions{defaultScenario: scenario.AppAcmeair, fixed: true,
		scenarioFlags: acmeairScenarioFlags, publish: &publish})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	return runLabMatrix(cmd, cfg, &publish, stdout, stderr)
}

// acmeairScenarioFlags are the acmeair scenario's values a person changes:
// the users, how long each run lasts, which modes.
func acmeairScenarioFlags(fs *flag.FlagSet, o *scenario.Overrides) {
	fs.Func("users", "concurrent `users` (the JMeter threads; the scenario's connections)", func(v string) (err error) {
		o.Connections, err = scenario.ParseIntList("-users", v)
		switch {
		case err != nil:
		case len(o.Connections) != 1:
			err = fmt.Errorf("one number of users, got %d", len(o.Connections))
		case o.Connections[0] < 1 || o.Connections[0] > scenario.MaxConnections:
			err = fmt.Errorf("must be 1 to %d", scenario.MaxConnections)
		}
		return err
	})
	fs.Func("duration", "each run's `time`, warm-up included", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("not a duration (e.g. 30s)")
		}
		o.Duration = &d
		return nil
	})
	fs.Func("modes", "`modes`: no-mesh,both-sidecars,ambient", func(v string) (err error) {
		o.Modes, err = scenario.ParseModes("-modes", v)
		return err
	})
}
