package cli

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshperf/meshperf/internal/proc"
)

// Pause is the pod sandbox's process (the pause image's entrypoint, not
// listed in the help): it holds the pod's namespaces open until SIGTERM or
// SIGINT, and as PID 1 of a pod that shares its PID namespace it reaps the
// children orphaned to it, as Kubernetes' pause does. The signals are
// caught rather than left to their default action because the kernel
// delivers no default-action signal to a namespace's PID 1.
func Pause(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf pause", "", "Waits for SIGTERM or SIGINT, reaping orphaned children: the pod sandbox of meshperf's pause image.")
	readyFile := cmd.flags.String("ready-file", "", "once the signals are caught, write the pid to this `file` as JSON (for tests: a signal sent earlier would kill it)")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	defer signal.Stop(signals)
	removeReady, err := writeReadyFile(*readyFile, proc.Ready{PID: os.Getpid()})
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer removeReady()
	for s := range signals {
		if s != syscall.SIGCHLD {
			return exitOK
		}
		reapChildren()
	}
	return exitOK
}

// reapChildren collects every exited child: one SIGCHLD may stand for
// several exits.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
