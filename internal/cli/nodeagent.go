package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshperf/meshperf/internal/lab/inpod"
	"github.com/meshperf/meshperf/internal/lab/nodeagent"
	"github.com/meshperf/meshperf/internal/pilot/kube"
)

// defaultZDSSocket is where ztunnel (and meshperf-proxy in its role) looks
// for the node agent, a directory the DaemonSet shares between the two.
const defaultZDSSocket = "/var/run/ztunnel/ztunnel.sock"

// NodeAgent is `meshperf node-agent`: istio-cni's node agent for ambient,
// run in the meshperf-node DaemonSet beside the node proxy.
func NodeAgent(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf node-agent", "[flags]",
		"Serves the ambient pods of one Kubernetes node, as istio-cni's node agent: watches the node's pods and their namespaces, "+
			"and for each pod enrolled (its or its namespace's label istio.io/dataplane-mode=ambient; a pod's \"none\" opts out; "+
			"no sidecar, not on the host's network, with an address) finds its network namespace through the host's /proc, "+
			"installs the in-pod redirection there and hands it to the node proxy over ZDS. A pod that goes or leaves ambient is "+
			"taken back and its rules removed; on exit every pod is. Runs in a pod with hostPID, privileged "+
			"(or NET_ADMIN and SYS_ADMIN), with iptables-restore.")
	var kubeconfig, node, socket, procRoot string
	cmd.flags.StringVar(&kubeconfig, "kubeconfig", "", "the cluster's kubeconfig `file`; in a pod, the pod's service account is used without it")
	cmd.flags.StringVar(&node, "node", os.Getenv("NODE_NAME"), "the `name` of the node whose pods are served (default $NODE_NAME)")
	cmd.flags.StringVar(&socket, "zds-socket", defaultZDSSocket, "the ZDS unix socket `path` the node proxy connects to (its INPOD_UDS)")
	cmd.flags.StringVar(&procRoot, "proc", "/proc", "the host's /proc `dir`, where pods' network namespaces are found")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	if node == "" {
		return cmd.exit(stderr, usagef("no node: give --node NAME, or set NODE_NAME (the DaemonSet sets it from spec.nodeName)"))
	}
	if st, err := os.Stat(procRoot); err != nil || !st.IsDir() {
		return cmd.exit(stderr, usagef("--proc %s: not a directory", procRoot))
	}
	cfg, err := kube.RESTConfig(kubeconfig, os.Getenv)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	if err := kube.Reachable(ctx, client, cfg.Host, 30*time.Second); err != nil {
		return cmd.exit(stderr, err)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		return cmd.exit(stderr, fmt.Errorf("ZDS socket directory: %w", err))
	}
	zds, err := inpod.Listen(socket, log)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer zds.Close()
	agent, err := nodeagent.New(nodeagent.Config{Client: client, Node: node, ProcRoot: procRoot, ZDS: zds, Log: log})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	err = agent.Run(ctx, func() {
		_, _ = fmt.Fprintf(stdout, "meshperf node-agent: serving node %s's ambient pods; ZDS on %s\n", node, socket)
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return cmd.exit(stderr, err)
	}
	return exitOK
}
