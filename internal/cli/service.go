package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"

	"github.com/meshperf/meshperf/internal/hosts"
	"github.com/meshperf/meshperf/internal/service"
	"github.com/meshperf/meshperf/internal/topology"
)

// isotope's service reads its graph and its name from these variables,
// and its graph from defaultServiceTopology without them; a pod spec
// written for isotope's image runs `meshperf service` unchanged.
const (
	serviceTopologyEnv     = "CONFIG_PATH"
	serviceNameEnv         = "SERVICE_NAME"
	defaultServiceTopology = "/etc/config/service-graph.yaml"
	serviceGCPercent       = 50
)

// Service runs `meshperf service`: one service of an isotope graph, as
// isotope's service plays it, until SIGINT or SIGTERM.
func Service(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(runService, args, stdout, stderr)
}

type serviceFlags struct {
	topology  string
	name      string
	hostsFile string
	readyFile string
	listeners listenerSet
}

func newServiceCommand(f *serviceFlags) *command {
	cmd := newCommand("meshperf service", "[flags]",
		"Plays one service of an isotope service graph as isotope's service does: HTTP/1.1, /metrics with\n"+
			"isotope's metrics, and on any other path the service's script (sleeps, calls to other services\n"+
			"with the trace headers copied, concurrent steps), failing at its error rate and answering with its\n"+
			"response size. docs/topologies.md describes it.")
	fs := cmd.flags
	fs.StringVar(&f.topology, "topology", "", "the graph: a topology `file` or a shipped topology's name (default $"+serviceTopologyEnv+", else "+defaultServiceTopology+")")
	fs.StringVar(&f.name, "name", "", "the `service` to play, by its name in the graph (default $"+serviceNameEnv+")")
	f.listeners = listenerSet{{name: listenerHTTP, flag: "port", def: fmt.Sprint(topology.ServicePort), required: true, barePort: true,
		usage: "listen on this `port` (all interfaces) or host:port; 0 picks a free one"}}
	f.listeners.define(fs)
	fs.StringVar(&f.hostsFile, "hosts", "", "resolve the services' host names from this hosts-format `file` first (the lab's Service addresses)")
	fs.StringVar(&f.readyFile, "ready-file", "", "once listening, write the address to this `file` as JSON (pid and listeners by name: http), for a parent that passed port 0")
	return cmd
}

func runService(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f serviceFlags
	cmd := newServiceCommand(&f)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	cfg, topo, err := f.config(stderr)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	// The lab runs a process per replica, hundreds on one machine. A
	// request allocates nothing in the service, so the heap only grows on
	// what does allocate (a /metrics scrape, a failure's message); a heap
	// that grows half as far past the live data keeps that small, at no
	// measurable CPU (docs/topologies.md). GOGC, when set, still decides.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serviceGCPercent)
	}
	h, err := service.New(cfg)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if err := f.listeners.bind(); err != nil {
		return cmd.exit(stderr, err)
	}
	defer f.listeners.close()
	ln := f.listeners.get(listenerHTTP)
	_, _ = fmt.Fprintf(stdout, "meshperf service: %s of %s on http://%s\n", cfg.Service.Name, topo.Name, ln.Addr())
	removeReady, err := writeReadyFile(f.readyFile, f.listeners.ready())
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer removeReady()
	if err := h.Serve(ctx, ln); err != nil {
		return cmd.exit(stderr, fmt.Errorf("serving on %s: %w", ln.Addr(), err))
	}
	return exitOK
}

// config reads the graph and the hosts file and picks the service: every
// input checked before anything listens.
func (f *serviceFlags) config(stderr io.Writer) (service.Config, *topology.Topology, error) {
	if err := f.listeners.check(); err != nil {
		return service.Config{}, nil, usageError{err.Error()}
	}
	name := firstSet(f.name, os.Getenv(serviceNameEnv))
	if name == "" {
		return service.Config{}, nil, usagef("-name: which service to play? (or set $%s)", serviceNameEnv)
	}
	topo, err := topology.Resolve(firstSet(f.topology, os.Getenv(serviceTopologyEnv), defaultServiceTopology))
	if err != nil {
		return service.Config{}, nil, inputError{err}
	}
	svc, ok := topo.Service(name)
	if !ok {
		names := make([]string, len(topo.Services))
		for i, s := range topo.Services {
			names[i] = s.Name
		}
		return service.Config{}, nil, inputError{fmt.Errorf("topology %s has no service %q (its services: %s)", topo.Name, name, strings.Join(names, ", "))}
	}
	cfg := service.Config{
		Service: svc,
		Logger:  slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if f.hostsFile != "" {
		table, err := hosts.Load(f.hostsFile)
		if err != nil {
			return service.Config{}, nil, inputError{err}
		}
		cfg.Hosts = table
	}
	return cfg, topo, nil
}

// firstSet is the first non-empty value: a flag, then isotope's variable, then
// isotope's default.
func firstSet(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}
