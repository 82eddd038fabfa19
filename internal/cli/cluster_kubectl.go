package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/kube/dist"
)

// clusterKubectl is `meshperf cluster kubectl [-state-dir DIR] ARGS...`:
// the pinned kubectl (built by `cluster build`; Debian's is too old) with
// the local cluster's administrator kubeconfig, as `minikube kubectl`
// does, so that scripts and users need neither its path nor KUBECONFIG.
// Every argument after meshperf's own flag goes to kubectl untouched;
// its exit status is kubectl's.
func clusterKubectl(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cluster kubectl", "[-state-dir DIR] [--] KUBECTL-ARGS...",
		"Runs the pinned kubectl against the local cluster (its administrator's kubeconfig), e.g.\n"+
			"`meshperf cluster kubectl get pods -A` or `meshperf pilot manifest | meshperf cluster kubectl apply -f -`.\n"+
			"Only a leading -state-dir (and -h) is meshperf's; the rest, flags included, is kubectl's. Exit status: kubectl's.")
	stateDir := cmd.flags.String("state-dir", cluster.DefaultStateDir, "the cluster's state directory")
	rest, err := kubectlArgs(cmd, args)
	if errors.Is(err, flag.ErrHelp) {
		cmd.printHelp(stdout)
		return exitOK
	}
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(rest) == 0 {
		return cmd.exit(stderr, usagef("no kubectl arguments: e.g. meshperf cluster kubectl get pods -A"))
	}
	bins, err := dist.Find()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	kubeconfig := cluster.AdminKubeconfig(*stateDir)
	if _, err := os.Stat(kubeconfig); err != nil {
		return cmd.exit(stderr, inputError{fmt.Errorf("no cluster in %s: run meshperf cluster up", *stateDir)})
	}
	kubectl := exec.Command(bins.Path(dist.Kubectl), rest...)
	kubectl.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	kubectl.Stdin, kubectl.Stdout, kubectl.Stderr = stdin, stdout, stderr
	err = kubectl.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()) // as a shell reports a killed command
		}
		return exit.ExitCode()
	case err != nil:
		return cmd.exit(stderr, err)
	}
	return exitOK
}

// kubectlArgs parses meshperf's own leading flags (-state-dir, -h) and
// returns the rest for kubectl untouched: kubectl's flags may come first
// (`kubectl -n NS get pods`), so parsing stops at the first argument that
// is not one of meshperf's.
func kubectlArgs(cmd *command, args []string) ([]string, error) {
	for len(args) > 0 {
		name, _, _ := strings.Cut(strings.TrimLeft(args[0], "-"), "=")
		switch {
		case args[0] == "--":
			return args[1:], nil
		case !strings.HasPrefix(args[0], "-") || (name != "state-dir" && name != "h" && name != "help"):
			return args, nil
		}
		n := 1
		if name == "state-dir" && !strings.Contains(args[0], "=") {
			n = 2
		}
		if len(args) < n {
			return nil, usagef("flag needs an argument: %s", args[0])
		}
		if err := cmd.flags.Parse(args[:n]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = args[n:]
	}
	return nil, nil
}
