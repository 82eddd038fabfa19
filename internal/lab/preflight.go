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
	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// Preflight says, in one line, why the lab cannot run cfg's scenario on
// this machine, before anything starts: an ambient mode needs network
// namespaces (its nodes, and the in-pod rules inside each pod, the
// waypoint's pod), -ztunnel needs a ztunnel that runs, and --prometheus
// the prometheus server.
func Preflight(cfg Config) error {
	if cfg.DBPath != "" {
		if _, err := results.ParseLocation(cfg.DBPath); err != nil {
			return err
		}
	}
	if err := preflightPrometheus(cfg); err != nil {
		return err
	}
	if cfg.Scenario.ProxyCPULimit != 0 && os.Geteuid() != 0 {
		return errors.New("proxyCPULimit: a proxy's CPU limit is a cgroup quota, which needs root; run meshperf lab as root or leave the limit out")
	}
	if cfg.Scenario.IsGraph() {
		meminfo, err := readMeminfo()
		if err != nil {
			return err
		}
		if err := preflightGraph(cfg.Scenario, cfg.Network, meminfo); err != nil {
			return err
		}
		if cfg.ZtunnelBin != "" {
			return errors.New("-ztunnel: a graph's ambient mode runs meshperf's node proxy only; leave -ztunnel out")
		}
	}
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
		if _, err := ztunnelComponent(cfg.ZtunnelBin); err != nil {
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

// versionTimeout bounds a binary's answer to being asked its version,
// which comes at once.
const versionTimeout = 5 * time.Second

// The version and commit in ztunnel's answer to `version`, a Go-style
// BuildInfo line: Version:"1.24.0" (or a git revision), GitRevision:"62d8...".
var (
	ztunnelVersionRE  = regexp.MustCompile(`\bVersion:"([^"]*)"`)
	ztunnelRevisionRE = regexp.MustCompile(`\bGitRevision:"([^"]*)"`)
)

// ztunnelComponent checks that path is a ztunnel that runs, by asking it
// `version`, and returns what it says it is.
func ztunnelComponent(path string) (results.Component, error) {
	out, m, err := askVersion(versionQuery{flagName: "-ztunnel", path: path, arg: "version", answers: ztunnelVersionRE, as: "ztunnel"})
	if err != nil {
		return results.Component{}, err
	}
	c := results.Component{Name: "ztunnel", Version: m[1]}
	if r := ztunnelRevisionRE.FindStringSubmatch(out); r != nil {
		c.Commit = r[1]
	}
	return c, nil
}

// versionQuery is how to ask a binary what it is.
type versionQuery struct {
	flagName, path string         // the flag that gave the binary, for errors
	arg            string         // its version command or flag
	answers        *regexp.Regexp // what its answer must match
	as             string         // the binary it must be, for errors
}

// askVersion runs the binary with its version argument and returns what it
// printed and the match of q.answers in it; the error names the flag that
// gave the path.
func askVersion(q versionQuery) (string, []string, error) {
	flagName, path := q.flagName, q.path
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return "", nil, fmt.Errorf("%s %s: no such file (build %s as docs/lab.md says)", flagName, path, q.as)
	case st.IsDir():
		return "", nil, fmt.Errorf("%s %s: is a directory, want the %s binary", flagName, path, q.as)
	case st.Mode()&0o111 == 0:
		return "", nil, fmt.Errorf("%s %s: not executable", flagName, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), versionTimeout)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, path, q.arg)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", nil, fmt.Errorf("%s %s: `%s %s` failed (%v): %s", flagName, path, path, q.arg, err, firstLine(out.String()))
	}
	m := q.answers.FindStringSubmatch(out.String())
	if m == nil {
		return "", nil, fmt.Errorf("%s %s: does not answer `%s` as %s does (got %q)", flagName, path, q.arg, q.as, firstLine(out.String()))
	}
	return out.String(), m, nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}
