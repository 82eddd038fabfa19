package lab

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
)

// What one pod of a graph costs in memory, as measured in the lab on this
// project's machine (graph-tree-13 and graph-100-pods, meshperf service
// and meshperf-proxy 0.1.0): an app's PSS 9 to 14 MB, a sidecar's 4 MB
// (their RSS, 41 to 48 MB and 14 MB, counts the binaries' pages every
// copy shares), and MemAvailable fell by 11 to 13 MB a pod standing 105
// pods up. PSS, rounded up for buffers under load, is what the preflight
// multiplies by the pods to refuse a graph that cannot fit before
// anything starts.
const (
	appMemoryMB     = 14
	sidecarMemoryMB = 6
)

// maxGraphPods is how many pods the lab's /24 holds (addresses .2 to .254)
// less the client pod and the ambient modes' two nodes.
const maxGraphPods = 253 - 1 - 2

// preflightGraph says why a graph scenario cannot run here: the pods need
// network namespaces, fit in the lab's /24, and their estimated memory in
// what is free.
func preflightGraph(s *scenario.Scenario, kind pod.Kind, meminfo string) error {
	t := graphOf(s)
	what := "topology " + t.Name
	if s.App != "" {
		what = "app " + s.App
	}
	if kind == pod.KindLoopback || (kind == "" && os.Geteuid() != 0) {
		return fmt.Errorf("%s needs network namespaces (one pod per replica, each with the service port 8080); run meshperf lab as root, without -network loopback", what)
	}
	pods := t.Pods() + 1 // the load generator's pod
	if t.Pods() > maxGraphPods {
		return fmt.Errorf("%s needs %d pods, more than the %d a lab network holds; lower replicas or numReplicas", what, t.Pods(), maxGraphPods)
	}
	perPod := appMemoryMB
	for _, m := range s.Modes {
		if c, _ := m.Sidecars(); c {
			perPod += sidecarMemoryMB
			break
		}
	}
	free, err := memAvailableMB(meminfo)
	if err != nil {
		return err
	}
	if need := pods * perPod; need > free {
		return fmt.Errorf("%s needs ~%d pods x %d MB = %.1f GB, %.1f GB is free; lower replicas or numReplicas",
			what, pods, perPod, float64(need)/1024, float64(free)/1024)
	}
	return nil
}

// memAvailableMB reads MemAvailable from the text of /proc/meminfo.
func memAvailableMB(meminfo string) (int, error) {
	sc := bufio.NewScanner(bytes.NewReader([]byte(meminfo)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, err := strconv.Atoi(f[1])
			if err != nil {
				break
			}
			return kb / 1024, nil
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable line to check the graph's memory against")
}

// readMeminfo is /proc/meminfo's text.
func readMeminfo() (string, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return "", fmt.Errorf("read free memory: %w", err)
	}
	return string(b), nil
}
