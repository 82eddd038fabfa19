package pod

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testutil"
)

// leftovers lists namespaces and links whose names start with prefix.
func leftovers(t *testing.T, prefix string) []string {
	t.Helper()
	var found []string
	for _, args := range [][]string{{"netns", "list"}, {"-o", "link", "show"}} {
		out, err := exec.Command("ip", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, prefix) {
				found = append(found, strings.TrimSpace(line))
			}
		}
	}
	return found
}

func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestCloseRemovesEverything(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "a", "b")
	var cmds []*proc.Process
	for i, p := range pods {
		// sh ignores nothing, but trap makes one of them need the SIGKILL.
		script := "exec sleep 30"
		if i == 1 {
			script = "trap '' TERM; sleep 30 & wait"
		}
		c, err := p.Start(proc.Spec{Path: "sh", Args: []string{"-c", script}, StopGrace: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	if err := pods[0].Capture(CaptureOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(leftovers(t, n.NamePrefix())) < 5 { // 2 netns, 2 veths, 1 bridge
		t.Fatalf("setup incomplete: %v", leftovers(t, n.NamePrefix()))
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := leftovers(t, n.NamePrefix()); len(got) > 0 {
		t.Errorf("after Close these remain:\n%s", strings.Join(got, "\n"))
	}
	for _, c := range cmds {
		if !processGone(c.PID()) {
			t.Errorf("pid %d still exists after Close", c.PID())
		}
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestCleanRemovesLeftoversOfACrashedRun(t *testing.T) {
	n := newTestNetwork(t) // its Close, at cleanup, must cope with Clean's work
	pods := addPods(t, n, "a", "b")
	tracked, err := pods[0].Start(proc.Spec{Path: "sleep", Args: []string{"30"}})
	if err != nil {
		t.Fatal(err)
	}
	// A process the Network knows nothing about, as after a crash.
	stray := exec.Command("ip", "netns", "exec", pods[1].Netns(), "sleep", "30")
	if err := stray.Start(); err != nil {
		t.Fatal(err)
	}
	strayDone := make(chan struct{})
	go func() { stray.Wait(); close(strayDone) }()
	waitInNetns(t, pods[1], stray.Process.Pid)

	removed, err := Clean(n.NamePrefix())
	if err != nil {
		t.Fatalf("Clean: %v", err)
	}
	for _, pid := range []int{tracked.PID(), stray.Process.Pid} {
		if !slices.Contains(removed.Processes, pid) {
			t.Errorf("Clean did not report killing pid %d: %+v", pid, removed)
		}
	}
	for _, ns := range []string{pods[0].Netns(), pods[1].Netns()} {
		if !slices.Contains(removed.Netns, ns) {
			t.Errorf("Clean did not report namespace %s: %+v", ns, removed)
		}
	}
	if !slices.Contains(removed.Links, n.Bridge()) {
		t.Errorf("Clean did not report bridge %s: %+v", n.Bridge(), removed)
	}
	if got := leftovers(t, n.NamePrefix()); len(got) > 0 {
		t.Errorf("after Clean these remain:\n%s", strings.Join(got, "\n"))
	}
	select {
	case <-strayDone:
	case <-time.After(5 * time.Second):
		t.Error("stray process still running 5s after Clean")
	}
	select {
	case <-tracked.Done():
	case <-time.After(5 * time.Second):
		t.Error("tracked process still running 5s after Clean")
	}
	again, err := Clean(n.NamePrefix())
	if err != nil || !again.Empty() {
		t.Errorf("second Clean = %+v, %v; want nothing", again, err)
	}
}

// waitInNetns waits until pid has entered p's namespace (ip netns exec
// switches namespace after it starts).
func waitInNetns(t *testing.T, p *Pod, pid int) {
	t.Helper()
	want, err := statNS(netnsDir + "/" + p.Netns())
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !slices.Contains(processesIn(map[nsID]bool{want: true}), pid) {
			return fmt.Errorf("pid %d has not entered %s", pid, p.Netns())
		}
		return nil
	})
}
