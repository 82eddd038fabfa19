package cli

import (
	"fmt"
	"io"

	"github.com/meshperf/meshperf/internal/version"
)

// Main runs meshperf with args (the command line without the program's
// name) and returns the exit status; cmd/meshperf only calls it.
func Main(args []string, stdout, stderr io.Writer) int {
	// Each command sets up its own stop signal, if it runs until stopped:
	// the lab lets a second Ctrl-C through, which a handler installed here
	// would catch.
	with := func(run func([]string, io.Writer, io.Writer) int) func([]string) int {
		return func(args []string) int { return run(args, stdout, stderr) }
	}
	meshperf := commandGroup{
		name:  "meshperf",
		about: "meshperf measures, tunes and tracks the performance of a service mesh.",
		subs: []subcommand{
			{name: "lab", about: "run a scenario: pods with and without sidecars, load, and what the mesh costs", run: with(Lab)},
			{name: "cluster", about: "build, bring up, check and tear down a real single-node Kubernetes cluster on this machine", run: with(Cluster)},
			{name: "topology", about: "check, list and show service graphs in isotope's format (the lab's realistic workloads)", run: with(Topology)},
			{name: "load", about: "generate load against a target (Fortio-compatible flags and JSON)", run: with(Load)},
			{name: "server", about: "run the echo server (HTTP/1.1 and h2c, TCP echo, gRPC health and ping)", run: with(Server)},
			{name: "service", about: "play one service of an isotope service graph (the lab's graph pods; isotope's service)", run: with(Service)},
			{name: "pilot", about: "run the control plane (Istio config in, Envoy xDS out)", run: with(Pilot)},
			{name: "capture", about: "install Istio's sidecar capture (iptables) in this network namespace: the injected istio-init container's command", run: with(Capture)},
			{name: "node-agent", about: "serve a Kubernetes node's ambient pods: in-pod redirection and ZDS to the node proxy (istio-cni's node agent)",
				run: func(args []string) int { return untilSignalled(NodeAgent, args, stdout, stderr) }},
			{name: "apply", about: "apply Istio/Kubernetes YAML to the running control plane", run: with(Apply)},
			{name: "delete", about: "delete the objects a YAML file names from the control plane", run: with(Delete)},
			{name: "get", about: "list or show objects in the control plane's store", run: with(Get)},
			{name: "acmeair", about: "the Acmeair-like airline app's services and BluePerf's driver", run: with(Acmeair)},
			{name: "cpload", about: "load-test a control plane with simulated sidecars; the book's tuning lab", run: with(Cpload)},
			{name: "bench", about: "side-by-side benchmarks: the proxy against HAProxy, the control plane against istiod, the load generator against Fortio and wrk", run: with(Bench)},
			{name: "compare", about: "compare two sets of runs with statistics: better, worse or no significant change", run: with(Compare)},
			{name: "history", about: "a scenario's figure across versions on one machine, and where it changed (regressions)", run: with(History)},
			{name: "bench", about: "side-by-side benchmarks: the proxy against HAProxy, the control plane against istiod, the load generator against Fortio and wrk", run: with(Bench)},
			{name: "perfcheck", about: "run the micro-benchmarks and compare them with the baselines kept beside them", run: with(Perfcheck)},
			{name: "export", about: "write runs as SMP documents, Fortio JSON or Istio's CSV", run: with(Export)},
			{name: "import", about: "store Fortio or Nighthawk JSON results as runs, for compare", run: with(Import)},
			{name: "store", about: "copy runs between results stores (SQLite, PostgreSQL); what a store holds", run: with(Store)},
			{name: "dashboard", about: "serve the results store read-only over HTTP: a JSON API for runs, compare and history", run: with(Dashboard)},
			{name: "image", about: "meshperf's OCI images (meshperf, meshperf-proxy, pause) for Kubernetes: build, import, push", run: with(Image)},
			{name: "pause", about: "the pod sandbox of meshperf's pause image", run: with(Pause), hidden: true},
			{name: "version", aliases: []string{"-version", "--version"}, about: "print the version", run: with(printVersion)},
		},
		notes: exitStatusHelp,
	}
	return meshperf.run(args, stdout, stderr)
}

func printVersion(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf version", "", "Prints meshperf's version: the release tag, else the module version, else the commit it was built from.")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	_, _ = fmt.Fprintln(stdout, "meshperf", version.String())
	return exitOK
}
