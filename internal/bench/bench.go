// Package bench holds what meshperf's side-by-side benchmarks share
// (meshperf bench proxy|pilot|load): finding the peer a benchmark sets
// meshperf beside (HAProxy, istiod, Fortio, wrk), running the subjects
// interleaved so that a machine's slow spell falls on all of them, and
// turning the repeats into medians and ratios that say when they are not
// firm. Each benchmark lives in its own file of this package; the CLI only
// parses flags and prints.
//
// Why ratios: this machine is shared and noisy, so an absolute figure moves
// from one run to the next by more than most changes worth making. Ours and
// the peer's, measured in the same rounds, move together; their ratio is
// what a baseline keeps and the regression check guards (baseline.go).
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strings"

	"gonum.org/v1/gonum/stat"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/results"
)

// Peer is another project's program that a benchmark measures meshperf
// beside.
type Peer struct {
	Name    string // the command's name on PATH: "haproxy"
	Flag    string // the flag that gives its path: "-haproxy"
	Install string // how to get it: "apt-get install haproxy"
}

// PeerError says a peer the benchmark was asked for cannot run: not
// installed, or the path given is not an executable file. The CLI prints
// it as its one line and exits 2.
type PeerError struct {
	Peer   Peer
	Path   string // the path given, "" when looked up on PATH
	Reason string // "not found on PATH", "no such file", "not executable"
}

func (e *PeerError) Error() string {
	where := e.Peer.Name
	if e.Path != "" {
		where = e.Peer.Flag + " " + e.Path
	}
	return fmt.Sprintf("%s: %s: get it with `%s`, or give its path with %s", where, e.Reason, e.Peer.Install, e.Peer.Flag)
}

// LookPeer finds p's executable: path when given (it must be an executable
// file), else p.Name on PATH.
func LookPeer(p Peer, path string) (string, error) {
	if path == "" {
		found, err := exec.LookPath(p.Name)
		if err != nil {
			return "", &PeerError{Peer: p, Reason: "not found on PATH"}
		}
		return found, nil
	}
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", &PeerError{Peer: p, Path: path, Reason: "no such file"}
	case err != nil:
		return "", &PeerError{Peer: p, Path: path, Reason: err.Error()}
	case info.IsDir() || info.Mode().Perm()&0o111 == 0:
		return "", &PeerError{Peer: p, Path: path, Reason: "not an executable file"}
	}
	return path, nil
}

// Samples are one figure of one subject over the repeats, in run order; a
// repeat that could not measure it holds NaN.
type Samples []float64

// Median of the known values (NaN when none).
func (s Samples) Median() float64 { return capacity.Median(s) }

// CV is the coefficient of variation of the known values, their standard
// deviation over their mean: how much the repeats disagree. NaN with fewer
// than two values or a zero mean.
func (s Samples) CV() float64 {
	known := s.known()
	if len(known) < 2 {
		return math.NaN()
	}
	mean, sd := stat.MeanStdDev(known, nil)
	if mean == 0 {
		return math.NaN()
	}
	return math.Abs(sd / mean)
}

func (s Samples) known() []float64 {
	out := make([]float64, 0, len(s))
	for _, v := range s {
		if !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// NoisyCV is the coefficient of variation above which a figure's repeats
// disagree too much for its median, or a ratio of it, to be called firm:
// the benchmark prints "noisy" beside it instead of a bare ratio. One hop's
// CPU per request repeats within a few percent on a quiet machine; a P99
// within ten to twenty.
const NoisyCV = 0.20

// Noisy says the repeats disagree beyond NoisyCV.
func (s Samples) Noisy() bool { cv := s.CV(); return !math.IsNaN(cv) && cv > NoisyCV }

// Ratio is ours against a peer on one figure: the ratio of the medians of
// repeats taken in the same rounds.
type Ratio struct {
	// Key names the figure where it was measured, unique within a
	// benchmark: "http1 plaintext 1000qps vcpu-per-1k". Baselines are
	// keyed by it.
	Key string `json:"key"`
	// Ours and Peer are the medians; Value is Ours / Peer.
	Ours  float64 `json:"ours"`
	Peer  float64 `json:"peer"`
	Value float64 `json:"ratio"`
	// OursCV and PeerCV are each side's coefficient of variation.
	OursCV float64 `json:"ours_cv"`
	PeerCV float64 `json:"peer_cv"`
	// Repeats is how many rounds measured both.
	Repeats int `json:"repeats"`
	// HigherIsBetter is true for rates; false for costs and latencies.
	HigherIsBetter bool `json:"higher_is_better"`
	// Target is the goal for Value (at most it, or at least it when
	// HigherIsBetter); 0 when there is none.
	Target float64 `json:"target,omitempty"`
}

// NewRatio compares ours with peer on one figure.
func NewRatio(key string, ours, peer Samples, higherIsBetter bool, target float64) Ratio {
	r := Ratio{Key: key, Ours: ours.Median(), Peer: peer.Median(), OursCV: ours.CV(), PeerCV: peer.CV(),
		Repeats: min(len(ours.known()), len(peer.known())), HigherIsBetter: higherIsBetter, Target: target}
	r.Value = r.Ours / r.Peer
	if r.Peer == 0 || math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
		r.Value = math.NaN()
	}
	return r
}

// MarshalJSON writes the ratio with whether it met its goal and is noisy,
// as the table says them, and an unknown figure (a CV from one repeat, a
// ratio without both medians) as null.
func (r Ratio) MarshalJSON() ([]byte, error) {
	type plain Ratio
	return results.MarshalNaN(struct {
		plain
		Met   bool `json:"met"`
		Noisy bool `json:"noisy"`
	}{plain(r), r.Met(), r.Noisy()})
}

// Noisy says either side's repeats disagree beyond NoisyCV, so the ratio
// is not firm.
func (r Ratio) Noisy() bool { return r.OursCV > NoisyCV || r.PeerCV > NoisyCV }

// Met says the ratio reaches its target; false without one or without a
// value.
func (r Ratio) Met() bool {
	if r.Target == 0 || math.IsNaN(r.Value) {
		return false
	}
	if r.HigherIsBetter {
		return r.Value >= r.Target
	}
	return r.Value <= r.Target
}

// String is the ratio as a table shows it: "0.87x", with "(noisy: CV 31%)"
// when it is not firm and the target's verdict when there is one.
func (r Ratio) String() string {
	if math.IsNaN(r.Value) {
		return "n/a"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%.2fx", r.Value)
	if r.Target != 0 {
		op := "<="
		if r.HigherIsBetter {
			op = ">="
		}
		verdict := "met"
		if !r.Met() {
			verdict = "missed"
		}
		fmt.Fprintf(&b, " (goal %s %.2fx: %s)", op, r.Target, verdict)
	}
	if r.Noisy() {
		fmt.Fprintf(&b, " (noisy: CV %.0f%% / %.0f%%)", 100*orZero(r.OursCV), 100*orZero(r.PeerCV))
	}
	return b.String()
}

func orZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// Interleave runs every subject once per round, for rounds rounds, and
// rotates the order each round: a slow spell of the machine (another job,
// a noisy neighbour) then falls on every subject rather than on whichever
// always ran at that point. run's round counts from 1. It stops at the
// first error or when ctx ends.
func Interleave(ctx context.Context, rounds int, subjects []string, run func(ctx context.Context, round int, subject string) error) error {
	for round := 1; round <= rounds; round++ {
		for i := range subjects {
			if err := ctx.Err(); err != nil {
				return err
			}
			s := subjects[(i+round-1)%len(subjects)]
			if err := run(ctx, round, s); err != nil {
				return err
			}
		}
	}
	return nil
}
