package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/cpload/driver"
)

// cploadScale is `meshperf cpload scale`: the same shape at growing sizes,
// and how the control plane's cost grows with them.
func cploadScale(ctx context.Context, args []string, stdout, stderr io.Writer, pilotCommand []string) int {
	cmd := newCommand("meshperf cpload scale", "[flags]",
		"Steps one mesh shape through growing sizes against meshperf pilot or --target, and prints per size the sync time, CPU and memory per proxy and per service, the change P99, and how each grows with the proxy count.")
	var f cploadRunFlags
	f.define(cmd.flags)
	var stepsFlag, htmlOut string
	var maxRatio float64
	cmd.flags.StringVar(&stepsFlag, "steps", "1,2,5", "sizes as `multiples` of the first size's namespaces, comma-separated and increasing (1x is --namespaces; with the defaults, Istio's published 1,000 services and 2,000 sidecars)")
	cmd.flags.StringVar(&htmlOut, "html", "", "also write the steps and charts of cost against proxies (log-log, fitted and linear lines) as a self-contained HTML page to `FILE`")
	rateVar(cmd.flags, &maxRatio, "max-cost-ratio", 0, "fail (exit 1) if the connect CPU per proxy of the last size is more than this many times the first's (0: no check)")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	multiples, err := parseSteps(stepsFlag)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if err := checkOutputDir("--html", htmlOut); err != nil {
		return cmd.exit(stderr, err)
	}
	if f.kube {
		return cmd.exit(stderr, usagef("--kube: cpload scale runs off Kubernetes so far (cpload run --kube for one size)"))
	}
	f.scaleDefaults(cmd.flags)
	base := f.namespaces
	var configs []driver.Config
	for _, m := range multiples {
		step := f
		step.namespaces = base * m
		c, err := step.config(pilotCommand, stderr)
		if err != nil {
			return cmd.exit(stderr, err)
		}
		configs = append(configs, c)
	}
	sr, runErr := driver.RunScale(ctx, configs, multiples)
	sr.Print(stdout)
	if runErr != nil {
		return cmd.exit(stderr, runErr)
	}
	if err := writeScalePage(htmlOut, sr); err != nil {
		return cmd.exit(stderr, err)
	}
	reports := make([]*driver.Report, 0, len(sr.Steps))
	for _, s := range sr.Steps {
		reports = append(reports, s.Report)
	}
	if err := saveCpload(f.jsonOut, f.db, sr, reports); err != nil {
		return cmd.exit(stderr, err)
	}
	return cmd.exit(stderr, sr.CheckCost(maxRatio))
}

// scaleDefaults are the shape for what the user left unset:
// uniform, 20 services per namespace with 2 replicas each, a Sidecar per
// namespace, all proxies connecting at once, no churn; 50 namespaces
// (1,000 services, 2,000 proxies) for the first size.
func (f *cploadRunFlags) scaleDefaults(fs *flag.FlagSet) {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	defaults := []struct {
		flag  string
		apply func()
	}{
		{"shape", func() { f.shape = "uniform" }},
		{"namespaces", func() { f.namespaces = 50 }},
		{"services", func() { f.services = 20 }},
		{"replicas", func() { f.replicas = 2 }},
		{"sidecar", func() { f.sidecar = "namespace" }},
		{"connect-rate", func() { f.connectRate = -1 }},
		{"churn", func() { f.churn = driver.ChurnNone }},
	}
	for _, d := range defaults {
		if !set[d.flag] {
			d.apply()
		}
	}
}

// parseSteps reads --steps: positive, strictly increasing integers.
func parseSteps(s string) ([]int, error) {
	var out []int
	for _, field := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(field), "x")))
		if err != nil || n <= 0 {
			return nil, usagef("--steps %q: want positive whole multiples such as 1,2,5,10", s)
		}
		if len(out) > 0 && n <= out[len(out)-1] {
			return nil, usagef("--steps %q: the sizes must increase", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// checkOutputDir says, before a run that takes minutes, that an output
// file's directory is missing (nil for an unset flag).
func checkOutputDir(flagName, path string) error {
	if path == "" {
		return nil
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return inputError{fmt.Errorf("%s %s: the directory %s does not exist; create it or give another path", flagName, path, dir)}
	}
	return nil
}

// writeScalePage writes the scale run's HTML page to path, if set.
func writeScalePage(path string, sr *driver.ScaleReport) error {
	if path == "" {
		return nil
	}
	var page bytes.Buffer
	if err := sr.WriteHTML(&page); err != nil {
		return err
	}
	if err := atomicfile.Write(path, page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write --html %s: %w", path, err)
	}
	return nil
}
