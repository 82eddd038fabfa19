package cli

import (
	"context"
	"io"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/results"
)

// benchPilotFlags are bench pilot's flags.
type benchPilotFlags struct {
	benchFlags
	clients, changes int
	spacing, timeout time.Duration
	istiod, meshperf string
}

func (f *benchPilotFlags) define(cmd *command) {
	fs := cmd.flags
	f.benchFlags.define(fs, "pilot")
	positiveVar(fs, &f.clients, "clients", 100, "simulated proxies (ADS clients), each a sidecar in its own namespace")
	positiveVar(fs, &f.changes, "changes", 20, "file changes per repeat")
	durationVar(fs, &f.spacing, "spacing", time.Second, "time between changes (longer than the debounce, so each is its own push)")
	durationVar(fs, &f.timeout, "timeout", time.Minute, "bound on each wait in a run (first sync, the changes' delivery); a run lasts -changes x -spacing")
	fs.StringVar(&f.istiod, "istiod", "", "measure istiod beside meshperf pilot: the `PATH` of a pilot-discovery built from istio/istio (docs/bench.md)")
	fs.StringVar(&f.meshperf, "meshperf", "", "run the pilot of the meshperf binary at `PATH` instead of this one's (to measure one build against another)")
}

// config checks the flags and the peer before anything runs.
func (f *benchPilotFlags) config(progress io.Writer) (bench.PilotConfig, error) {
	if f.istiod == "" && (f.update != "" || f.baseline != "") {
		return bench.PilotConfig{}, usagef("-update and -baseline hold ratios of ours against istiod: give -istiod PATH (without it the benchmark measures ours alone, with no ratio to record or check)")
	}
	if err := f.check(); err != nil {
		return bench.PilotConfig{}, err
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
	r, err := bench.RunPilot(ctx, c)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	bench.PrintPilot(stdout, r)
	if err := f.storePilotRuns(r); err != nil {
		return cmd.exit(stderr, err)
	}
	return cmd.exit(stderr, f.finish(r.Ratios, r, stdout, stderr))
}

// storePilotRuns stores each run as a control-plane run whose report
// carries its stages.
func (f *benchPilotFlags) storePilotRuns(r *bench.PilotResult) error {
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
