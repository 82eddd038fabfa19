package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/kube/image"
)

// Cluster is `meshperf cluster`: a real single-node Kubernetes cluster on
// this machine, for tests and CI (docs/kubernetes.md).
func Cluster(args []string, stdout, stderr io.Writer) int {
	g := commandGroup{
		name:  "meshperf cluster",
		about: "A real single-node Kubernetes cluster on this machine, for tests and CI: every address in 198.18.0.0/15, nothing routed off the machine.",
		subs: []subcommand{
			{name: "build", about: "build the pinned Kubernetes, CoreDNS and kwok from the Go module proxy into their cache",
				run: func(args []string) int { return untilSignalled(clusterBuild, args, stdout, stderr) }},
			{name: "up", about: "bring the cluster up (root): etcd, control plane, containerd, kubelet, kube-proxy, CoreDNS",
				run: func(args []string) int { return untilSignalled(clusterUp, args, stdout, stderr) }},
			{name: "down", about: "tear the cluster down and check the host is as it was before up",
				run: func(args []string) int { return clusterDown(args, stdout, stderr) }},
			{name: "status", about: "say whether the cluster is up, its node Ready, its processes running",
				run: func(args []string) int { return clusterStatus(args, stdout, stderr) }},
			{name: "kubectl", about: "run the pinned kubectl against the local cluster, with its administrator's kubeconfig",
				run: func(args []string) int { return clusterKubectl(args, os.Stdin, stdout, stderr) }},
		},
	}
	return g.run(args, stdout, stderr)
}

func clusterBuild(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cluster build", "",
		fmt.Sprintf("Builds Kubernetes %s, CoreDNS %s and kwok %s from the Go module proxy into their cache,\n"+
			"/var/cache/meshperf/kubernetes-%s as root (%s overrides it), with kwok's stage files from its module\n"+
			"in kwok-stages/, one line per step. Nothing is built when every binary is there with its version (missing\n"+
			"stages are copied alone); an interrupted build leaves the cache as it was. Cold: about\n"+
			"7 minutes on 2 cores and 5 GB of Go caches; warm: a minute or two.",
			dist.KubernetesVersion, dist.CoreDNSVersion, dist.KwokVersion, dist.KubernetesVersion, dist.DirEnv))
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	res, err := dist.Build(ctx, dist.Dir(), stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if res.AlreadyBuilt {
		fmt.Fprintf(stdout, "already built: %s\n", res.Dir)
		return exitOK
	}
	fmt.Fprintf(stdout, "built: %s\n", res.Dir)
	return exitOK
}

func clusterUp(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cluster up", "[flags]",
		"Brings up a single-node cluster as root, one line per step: etcd, kube-apiserver on "+cluster.NodeIP+", the controller\n"+
			"manager and scheduler, containerd (its own, under the state directory), the kubelet, kube-proxy and CoreDNS.\n"+
			"It returns once the node is Ready and CoreDNS answers, and prints the administrator's kubeconfig; the\n"+
			"processes keep running until `meshperf cluster down`. A second up says the cluster is up. A failure or\n"+
			"Ctrl-C tears down what it started. What the machine lacks is listed, one line each (exit 2).")
	stateDir := cmd.flags.String("state-dir", cluster.DefaultStateDir, "directory for the cluster's certificates, configuration, logs and state")
	wait := cmd.flags.Duration("wait", 3*time.Minute, "how long to wait for the cluster to be up")
	repo := cmd.flags.String("image-repo", image.DefaultRepo, "repository of the images; the pods' sandbox image is REPO/pause:TAG, built from this meshperf")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if *wait <= 0 {
		return cmd.exit(stderr, usagef("-wait must be positive, got %s", *wait))
	}
	if err := image.CheckRepo(*repo); err != nil {
		return cmd.exit(stderr, usagef("%v", err))
	}
	exe, err := os.Executable()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	res, err := cluster.Up(ctx, cluster.Options{StateDir: *stateDir, Wait: *wait, Executable: exe, ImageRepo: *repo, Progress: stdout})
	var missing *cluster.MissingError
	switch {
	case errors.As(err, &missing):
		for _, line := range missing.Lines {
			fmt.Fprintf(stderr, "%s: %s\n", cmd.name, line)
		}
		return exitBadInput
	case err != nil:
		return cmd.exit(stderr, err)
	case res.AlreadyUp:
		fmt.Fprintf(stdout, "cluster is up: kubeconfig %s\n", res.Kubeconfig)
	default:
		fmt.Fprintf(stdout, "cluster up: kubeconfig %s\n", res.Kubeconfig)
	}
	return exitOK
}

func clusterDown(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cluster down", "[flags]",
		"Tears the cluster down as root, from its state file alone (so also after a crash): deletes the pods through\n"+
			"the API, stops every recorded process and this containerd's shims, removes the mounts, network namespaces,\n"+
			"bridge, routes, address, iptables chains, cgroups and directories it created, restores the sysctls, then\n"+
			"compares the host with what up recorded: one line per difference and exit 1 if it is not as it was.")
	stateDir := cmd.flags.String("state-dir", cluster.DefaultStateDir, "the cluster's state directory")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	// Teardown runs to its end whatever Ctrl-C or SIGTERM arrives:
	// stopping halfway would leave the host half restored (a second down
	// would finish it, from the state file that stays until the end).
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	res, err := cluster.Down(context.Background(), *stateDir, stdout)
	var missing *cluster.MissingError
	switch {
	case cluster.IsNoCluster(err):
		fmt.Fprintf(stdout, "no cluster in %s\n", *stateDir)
		return exitOK
	case errors.As(err, &missing):
		return cmd.exit(stderr, inputError{missing})
	case err != nil:
		return cmd.exit(stderr, err)
	}
	if len(res.Differences) > 0 {
		for _, d := range res.Differences {
			fmt.Fprintf(stderr, "%s: the host is not as it was: %s\n", cmd.name, d)
		}
		return exitFailed
	}
	fmt.Fprintln(stdout, "cluster down: the host is as it was")
	return exitOK
}

func clusterStatus(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cluster status", "[flags]",
		"Says whether the cluster is up (exit 0) or not (exit 1): its node Ready, its processes running, its kubeconfig.")
	stateDir := cmd.flags.String("state-dir", cluster.DefaultStateDir, "the cluster's state directory")
	asJSON := cmd.flags.Bool("json", false, "print the status as JSON")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	st, err := cluster.GetStatus(context.Background(), *stateDir)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return cmd.exit(stderr, err)
		}
	} else {
		printClusterStatus(stdout, st)
	}
	if !st.Up {
		return exitFailed
	}
	return exitOK
}

func printClusterStatus(w io.Writer, st cluster.Status) {
	if st.Up {
		fmt.Fprintf(w, "cluster is up: kubeconfig %s\n", st.Kubeconfig)
	} else {
		fmt.Fprintf(w, "cluster is down: %s (%s)\n", st.Problem, st.StateDir)
	}
	if len(st.Processes) == 0 {
		return
	}
	fmt.Fprintf(w, "node %s Ready: %v\n", cluster.NodeName, st.NodeReady)
	for _, p := range st.Processes {
		state := "running"
		if !p.Alive {
			state = "not running"
		}
		fmt.Fprintf(w, "  %-24s pid %-8d %s\n", p.Name, p.PID, state)
	}
}
