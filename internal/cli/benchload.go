package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/syscmd"
)

const benchLoadAbout = `Runs the load generators side by side against one meshperf server on loopback: meshperf load, Fortio
and wrk, each a child process charged alike (its CPU from the kernel's accounting of the child, start-up
included, per call it made). Each rate of -qps is a case (0: as fast as the connections go); the generators
run interleaved, -repeats rounds, and the table gives each one's medians: rate achieved, CPU per request
split into user and system, peak RSS, syscalls per request (when perf is installed), context switches
per request, latencies as each reports them (only meshperf load corrects for coordinated omission), and
the echo server's CPU, which flat out is the bottleneck every generator shares. Ratios ours/peer: CPU per
request against Fortio at each fixed rate (goal <= 0.5x), the maximum rate against wrk (goal >= 1.0x).
Fortio is -fortio PATH, else bin/tools/fortio beside this meshperf (bash scripts/setup test builds it),
else fortio on PATH; wrk is -wrk PATH, else wrk on PATH, and runs only at -qps 0 (it has no fixed
rate). A peer that is not found is left out with a note; one given by its flag that is missing is an
error. Every run is stored in -db as scenario bench-load, its generator as the mode.`

// benchLoadFlags are meshperf bench load's flags.
type benchLoadFlags struct {
	benchFlags
	duration     time.Duration
	rates        []int
	connections  int
	responseSize int
	fortio, wrk  string
	out          string
}

// benchLoad runs `meshperf bench load`.
func benchLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf bench load", "[flags]", benchLoadAbout)
	var f benchLoadFlags
	fs := cmd.flags
	f.define(fs, "load")
	durationVar(fs, &f.duration, "duration", 10*time.Second, "how long each run lasts")
	f.rates = []int{1000, 5000, 0}
	fs.Func("qps", "comma-separated `rates`, one case each; 0 is as fast as possible (default 1000,5000,0)", func(v string) (err error) {
		f.rates, err = scenario.ParseIntList("-qps", v)
		return err
	})
	positiveVar(fs, &f.connections, "c", 4, "connections of every generator")
	positiveVar(fs, &f.responseSize, "size", 1024, "the echo server's response body, `bytes`")
	fs.StringVar(&f.fortio, "fortio", "", "Fortio's binary (`PATH`; default bin/tools/fortio beside meshperf, else fortio on PATH)")
	fs.StringVar(&f.wrk, "wrk", "", "wrk's binary (`PATH`; default wrk on PATH)")
	fs.StringVar(&f.out, "out", "", "keep each run's result and log here (`dir`; default results/bench-load/<runid>)")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	o, err := f.options(stderr)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return cmd.exit(stderr, fmt.Errorf("-out: %w", err))
	}
	rep, err := bench.RunLoad(ctx, o)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if err := f.storeRuns(rep.Runs()); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	return cmd.exit(stderr, f.finish(rep.Ratios, rep, stdout, stderr))
}

// options checks the flags and finds the binaries: a peer asked for by
// its flag that cannot run is bad input (bench.PeerError); one not asked
// for and not found is left out, and the report says so.
func (f *benchLoadFlags) options(stderr io.Writer) (bench.LoadOptions, error) {
	if f.duration <= 0 {
		return bench.LoadOptions{}, usagef("-duration must be more than 0")
	}
	if err := f.check(); err != nil {
		return bench.LoadOptions{}, err
	}
	for _, r := range f.rates {
		if r < 0 {
			return bench.LoadOptions{}, usagef("-qps %d: a rate is 0 (as fast as possible) or more", r)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return bench.LoadOptions{}, fmt.Errorf("find the meshperf binary: %w", err)
	}
	o := bench.LoadOptions{Meshperf: self, Rates: f.rates, Connections: f.connections, Duration: f.duration,
		Repeats: f.repeats, ResponseSize: f.responseSize, Labels: f.labels, RunID: pod.NewRunID(), Progress: stderr}
	if o.Fortio, err = findFortio(f.fortio, self); err != nil {
		return o, inputError{err}
	}
	if o.Wrk, err = bench.LookPeer(bench.WrkPeer, f.wrk); err != nil {
		if f.wrk != "" {
			return o, inputError{err}
		}
		o.Wrk = ""
	}
	if o.Perf, err = syscmd.Find("perf", "linux-perf"); err != nil {
		o.Perf = ""
	}
	o.Dir = f.out
	if o.Dir == "" {
		o.Dir = filepath.Join("results", "bench-load", o.RunID)
	}
	return o, nil
}

// findFortio is -fortio when given (it must run), else the Fortio that
// bash scripts/setup test builds into bin/tools beside bin/meshperf, else
// fortio on PATH, else "" (left out).
func findFortio(given, self string) (string, error) {
	if given != "" {
		return bench.LookPeer(bench.FortioPeer, given)
	}
	if p, err := bench.LookPeer(bench.FortioPeer, filepath.Join(filepath.Dir(self), "tools", "fortio")); err == nil {
		return p, nil
	}
	if p, err := bench.LookPeer(bench.FortioPeer, ""); err == nil {
		return p, nil
	}
	return "", nil
}
