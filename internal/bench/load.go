package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/results"
)

// meshperf bench load: the load generators side by side against one echo
// server on loopback. Every generator is a child process started the same
// way, so that each is charged alike: its whole life's CPU from the
// kernel's accounting of the child (rusage), start-up included, per call it
// made.

// The load generators, as runs name them (results.Run.Mode).
const (
	GeneratorMeshperf = "meshperf-load"
	GeneratorFortio   = "fortio"
	GeneratorWrk      = "wrk"
)

// LoadScenario is the scenario of the runs the load benchmark stores.
const LoadScenario = "bench-load"

// The load benchmark's peers.
var (
	FortioPeer = Peer{Name: "fortio", Flag: "-fortio", Install: "go install fortio.org/fortio@latest"}
	WrkPeer    = Peer{Name: "wrk", Flag: "-wrk", Install: "apt-get install wrk"}
)

// The goals for meshperf load: at most half Fortio's CPU per
// request at a fixed rate, at least wrk's rate when both go flat out.
const (
	LoadCPUTarget     = 0.5
	LoadMaxRateTarget = 1.0
)

// LoadOptions say what the load benchmark runs.
type LoadOptions struct {
	// Meshperf is the meshperf binary: it serves (meshperf server) and
	// loads (meshperf load).
	Meshperf string
	// Fortio and Wrk are the peers' binaries; "" leaves one out.
	Fortio, Wrk string
	// Perf is perf's binary, for syscalls per request; "" counts none.
	Perf string
	// Rates are the cases' requested rates; 0 is the maximum rate, the
	// only case wrk runs (it has no fixed rate).
	Rates       []int
	Connections int
	Duration    time.Duration // of each run
	Repeats     int           // rounds, each running every generator once
	// ResponseSize is the echo server's response body, bytes.
	ResponseSize int
	// Dir receives each run's result and log files; it must exist.
	Dir string
	// RunID is shared by the invocation's stored runs (pod.NewRunID when
	// empty); Labels are their provenance labels.
	RunID, Labels string
	// Progress receives a line per run; nil for none.
	Progress io.Writer
}

// LoadReport is what the load benchmark measured.
type LoadReport struct {
	RunID       string     `json:"run_id"`
	Connections int        `json:"connections"`
	Duration    string     `json:"duration"`
	Repeats     int        `json:"repeats"`
	Size        int        `json:"response_size"`
	Cases       []LoadCase `json:"cases"`
	Ratios      []Ratio    `json:"ratios"`
	Notes       []string   `json:"notes,omitempty"`
	// Measures are the runs one by one, in the order they ran.
	Measures []*LoadMeasure `json:"-"`
}

// RunLoad runs the load benchmark: one echo server, then every case's
// generators interleaved for o.Repeats rounds.
func RunLoad(ctx context.Context, o LoadOptions) (*LoadReport, error) {
	if o.Repeats < 1 || o.Connections < 1 || o.Duration <= 0 || len(o.Rates) == 0 {
		return nil, errors.New("bench load: repeats, connections, duration and rates must be set")
	}
	server, url, err := startEchoServer(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { _ = server.Stop() }()
	rep := &LoadReport{RunID: cmp.Or(o.RunID, pod.NewRunID()), Connections: o.Connections, Duration: o.Duration.String(), Repeats: o.Repeats,
		Size: o.ResponseSize}
	prov, err := loadProvenance(o)
	if err != nil {
		return nil, err
	}
	for _, rate := range o.Rates {
		err := Interleave(ctx, o.Repeats, generatorsFor(o, rate), func(ctx context.Context, round int, gen string) error {
			m, err := measureLoad(ctx, o, loadRun{generator: gen, rate: rate, round: round, url: url, server: server})
			if err != nil {
				return err
			}
			m.Run.RunID, m.Run.Provenance = rep.RunID, prov
			rep.Measures = append(rep.Measures, m)
			progressf(o.Progress, "%s %s round %d: %s\n", caseName(rate), gen, round, m.Brief())
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	rep.summarize(o)
	return rep, nil
}

// generatorsFor are the generators a case runs: wrk only flat out.
func generatorsFor(o LoadOptions, rate int) []string {
	gens := []string{GeneratorMeshperf}
	if o.Fortio != "" {
		gens = append(gens, GeneratorFortio)
	}
	if o.Wrk != "" && rate == 0 {
		gens = append(gens, GeneratorWrk)
	}
	return gens
}

// startEchoServer starts `meshperf server` on a loopback port of its
// choosing, HTTP only, and returns it and the URL every generator loads:
// the echo path with a response body of o.ResponseSize bytes.
func startEchoServer(ctx context.Context, o LoadOptions) (*proc.Process, string, error) {
	ready := filepath.Join(o.Dir, "server.ready")
	p, err := proc.Start(proc.Spec{
		Name: "echo server", Path: o.Meshperf, LogPath: filepath.Join(o.Dir, "server.log"), ReadyFile: ready,
		Args: []string{"server", "-http-port", "127.0.0.1:0", "-grpc-port", "disabled", "-tcp-port", "disabled",
			"-quiet", "-ready-file", ready},
		ParentDeathSignal: syscall.SIGKILL,
	})
	if err != nil {
		return nil, "", fmt.Errorf("bench load: %w", err)
	}
	r, err := p.WaitReady(ctx, 30*time.Second)
	if err == nil {
		var addr string
		if addr, err = r.Listener("http"); err == nil {
			return p, "http://" + addr + "/echo?size=" + strconv.Itoa(o.ResponseSize), nil
		}
	}
	_ = p.Stop()
	return nil, "", fmt.Errorf("bench load: echo server: %w", err)
}

// loadProvenance is every stored run's: this meshperf, this machine, the
// benchmark's parameters and the user's labels. No mesh is on the path.
func loadProvenance(o LoadOptions) (results.Provenance, error) {
	hash, err := results.ParamsHash(struct {
		Rates       []int
		Connections int
		Duration    time.Duration
		Size        int
	}{o.Rates, o.Connections, o.Duration, o.ResponseSize})
	if err != nil {
		return results.Provenance{}, fmt.Errorf("bench load: %w", err)
	}
	return results.Provenance{Meshperf: results.ThisBuild(), ParamsHash: hash, Labels: o.Labels,
		Machine: results.LocalMachine()}, nil
}

// caseName is how tables and ratio keys name a rate: "1000qps", "max".
func caseName(rate int) string {
	if rate == 0 {
		return "max"
	}
	return strconv.Itoa(rate) + "qps"
}

func progressf(w io.Writer, format string, args ...any) {
	if w != nil {
		_, _ = fmt.Fprintf(w, format, args...)
	}
}

// perRequest is total over calls, NaN without calls.
func perRequest(total float64, calls int64) float64 {
	if calls <= 0 {
		return math.NaN()
	}
	return total / float64(calls)
}

// Runs are the runs as stored, in the order they ran.
func (rep *LoadReport) Runs() []results.Run {
	out := make([]results.Run, len(rep.Measures))
	for i, m := range rep.Measures {
		out[i] = m.Run
	}
	return out
}
