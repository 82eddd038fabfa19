package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/results"
)

// benchPilotFlags are bench pilot's flags.
type benchPilotFlags struct {
	clients, changes, repeats int
	spacing, timeout          time.Duration
	istiod, meshperf          string
	jsonOut, db, labels       string
	baseline, update          string
}

func (f *benchPilotFlags) define(cmd *command) {
	fs := cmd.flags
	positiveVar(fs, &f.clients, "clients", 100, "simulated proxies (ADS clients), each a sidecar in its own namespace")
	positiveVar(fs, &f.changes, "changes", 20, "file changes per repeat")
	positiveVar(fs, &f.repeats, "repeats", 5, "repeats of each control plane, interleaved")
	durationVar(fs, &f.spacing, "spacing", time.Second, "time between changes (longer than the debounce, so each is its own push)")
	durationVar(fs, &f.timeout, "timeout", time.Minute, "bound on each wait in a run (first sync, the changes' delivery); a run lasts -changes x -spacing")
	fs.StringVar(&f.istiod, "istiod", "", "measure istiod beside meshperf pilot: the `PATH` of a pilot-discovery built from istio/istio (docs/bench.md)")
	fs.StringVar(&f.meshperf, "meshperf", "", "run the pilot of the meshperf binary at `PATH` instead of this one's (to measure one build against another)")
	fs.StringVar(&f.jsonOut, "json", "", "write the runs, medians and ratios as JSON to `FILE`")
	fs.StringVar(&f.db, "db", "", "store each run in this results database (`PATH` or postgres:// URL); meshperf history -cpload bench-pilot follows them")
	fs.StringVar(&f.labels, "labels", "", "labels recorded with the runs")
	fs.StringVar(&f.baseline, "baseline", "", "check the ratios against this baseline `FILE`; exit 1 on a regression")
	fs.StringVar(&f.update, "update", "", "write the ratios as the baseline `FILE` (needs -istiod: the ratios are ours against istiod)")
}

// config checks the flags and the peer before anything runs.
func (f *benchPilotFlags) config(progress io.Writer) (bench.PilotConfig, error) {
	if err := checkStoreLocation(f.db); err != nil {
		return bench.PilotConfig{}, err
	}
	if f.istiod == "" && (f.update != "" || f.baseline != "") {
		return bench.PilotConfig{}, usagef("-update and -baseline hold ratios of ours against istiod: give -istiod PATH (without it the benchmark measures ours alone, with no ratio to record or check)")
	}
	if f.update != "" && f.repeats < 2 {
		return bench.PilotConfig{}, usagef("-update needs -repeats 2 or more: a baseline keeps the repeats' noise beside each ratio")
	}
	d := push.DefaultOptions()
	c := bench.PilotConfig{Clients: f.clients, Changes: f.changes, Spacing: f.spacing, Repeats: f.repeats,
		DebounceAfter: d.DebounceAfter, DebounceMax: d.DebounceMax, Timeout: f.timeout, Labels: f.labels, Progress: progress}
	if f.istiod != "" {
		path, err := bench.LookPeer(bench.Istiod, f.istiod)
		if err != nil {
			return c, inputError{err}
		}
		c.Istiod = path
	}
	if f.meshperf != "" {
		path, err := bench.LookPeer(bench.Peer{Name: "meshperf", Flag: "-meshperf", Install: "go build ./cmd/meshperf"}, f.meshperf)
		if err != nil {
			return c, inputError{err}
		}
		c.Meshperf = []string{path, "pilot"}
	}
	if err := c.Validate(); err != nil {
		return c, usageError{err.Error()}
	}
	return c, nil
}

func benchPilot(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf bench pilot", "[flags]",
		"Times a file change in the watched config directory to the CDS of N simulated proxies, split by stage "+
			"(watch, debounce, push, send): meshperf pilot --configDir, and istiod in its file mode with -istiod, "+
			"interleaved, with Istio's default debounce on both.")
	var f benchPilotFlags
	f.define(cmd)
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	c, err := f.config(stderr)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	var base *bench.Baseline
	if f.baseline != "" {
		b, err := bench.ReadBaseline(f.baseline)
		if err != nil {
			return cmd.exit(stderr, inputError{err})
		}
		base = &b
	}
	r, err := bench.RunPilot(ctx, c)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	bench.PrintPilot(stdout, r)
	if err := savePilotBench(f, r); err != nil {
		return cmd.exit(stderr, err)
	}
	if f.update != "" {
		if err := bench.NewBaseline("pilot", r.Ratios, time.Now()).Write(f.update); err != nil {
			return cmd.exit(stderr, err)
		}
		fmt.Fprintf(stdout, "baseline written to %s\n", f.update)
	}
	if base != nil {
		return cmd.exit(stderr, checkPilotBaseline(stdout, *base, r.Ratios))
	}
	return exitOK
}

// checkPilotBaseline prints each regression and fails when there is one.
func checkPilotBaseline(w io.Writer, base bench.Baseline, ratios []bench.Ratio) error {
	regs, err := base.Check(ratios)
	if err != nil {
		return fmt.Errorf("-baseline: %w", err)
	}
	for _, r := range regs {
		fmt.Fprintf(w, "regression: %s\n", r)
	}
	if len(regs) > 0 {
		return fmt.Errorf("%d ratio(s) regressed against the baseline", len(regs))
	}
	fmt.Fprintln(w, "no regression against the baseline")
	return nil
}

// savePilotBench writes -json and stores each run as a control-plane run
// whose report carries its stages.
func savePilotBench(f benchPilotFlags, r *bench.PilotResult) error {
	if f.jsonOut != "" {
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.jsonOut, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("writing -json: %w", err)
		}
	}
	if f.db == "" {
		return nil
	}
	rows := make([]results.ControlPlaneRun, 0, len(r.Runs))
	for _, run := range r.Runs {
		row, err := run.StoreRow()
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return storeControlPlaneRuns(f.db, rows)
}
