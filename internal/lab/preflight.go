package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// Preflight says, in one line, why the lab cannot run cfg's scenario on
// this machine, before anything starts: an ambient mode needs network
// namespaces (its nodes, and the in-pod rules inside each pod, the
// waypoint's pod), and -ztunnel needs a ztunnel that runs.
func Preflight(cfg Config) error {
	ambient := ""
	for _, m := range cfg.Scenario.Modes {
		if m.NodeProxies() && ambient == "" {
			ambient = string(m)
		}
		if m.Ztunnel() && cfg.ZtunnelBin == "" {
			return fmt.Errorf("mode %s runs the real ztunnel: give its binary with -ztunnel PATH", m)
		}
	}
	if ambient == "" {
		if cfg.ZtunnelBin != "" {
			return errors.New("-ztunnel: no ambient mode to run it in; add -modes ambient")
		}
		return nil
	}
	if cfg.ZtunnelBin != "" {
		if _, err := ztunnelVersion(cfg.ZtunnelBin); err != nil {
			return err
		}
	}
	return ambientNetwork(ambient, cfg.Network)
}

// ambientNetwork checks that the pods can be network namespaces on nodes:
// root, no -network loopback, and iptables-restore for the in-pod rules.
func ambientNetwork(mode string, kind pod.Kind) error {
	if kind == pod.KindLoopback {
		return fmt.Errorf("mode %s needs network namespaces (nodes and in-pod redirection), not -network loopback; run as root with -network netns", mode)
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("mode %s needs root: its nodes are network namespaces and its pods get in-pod iptables rules; run meshperf lab as root", mode)
	}
	if _, err := syscmd.Find("iptables-restore", "iptables"); err != nil {
		return fmt.Errorf("mode %s needs iptables-restore for the in-pod rules: %w", mode, err)
	}
	return nil
}

// ztunnelVersionTimeout bounds `ztunnel version`, which answers at once.
const ztunnelVersionTimeout = 5 * time.Second

// ztunnelVersionRE finds the version in ztunnel's answer to `version`
// (a Go-style BuildInfo line: Version:"1.24.0" or a git revision).
var ztunnelVersionRE = regexp.MustCompile(`Version:"([^"]*)"`)

// ztunnelVersion checks that path is a ztunnel that runs, by asking it
// `version`, and returns the version it gives.
func ztunnelVersion(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", fmt.Errorf("-ztunnel %s: no such file (build ztunnel as docs/lab.md says)", path)
	case st.IsDir():
		return "", fmt.Errorf("-ztunnel %s: is a directory, want the ztunnel binary", path)
	case st.Mode()&0o111 == 0:
		return "", fmt.Errorf("-ztunnel %s: not executable", path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ztunnelVersionTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "version")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		return "", fmt.Errorf("-ztunnel %s: `%s version` failed (%v): %s", path, path, err, first)
	}
	m := ztunnelVersionRE.FindStringSubmatch(out.String())
	if m == nil {
		first, _, _ := strings.Cut(strings.TrimSpace(out.String()), "\n")
		return "", fmt.Errorf("-ztunnel %s: does not answer `version` as ztunnel does (got %q)", path, first)
	}
	return m[1], nil
}
