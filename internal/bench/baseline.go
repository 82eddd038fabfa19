package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/results"
)

// Baseline is a benchmark's ratios as recorded on one machine (`-update`),
// committed beside the benchmarks (benchmarks/bench/NAME.baseline.json):
// the regression check (`-baseline FILE`) holds a new run's ratios against
// them. Ratios rather than absolute figures, because the peer measured in
// the same rounds carries the machine's mood with it.
type Baseline struct {
	Bench    string           `json:"bench"`
	Machine  results.Machine  `json:"machine"`
	Meshperf results.Build    `json:"meshperf"`
	Recorded time.Time        `json:"recorded"`
	Ratios   map[string]Ratio `json:"ratios"` // by Ratio.Key
}

// NewBaseline records ratios as bench's baseline on this machine.
func NewBaseline(bench string, ratios []Ratio, now time.Time) Baseline {
	b := Baseline{Bench: bench, Machine: results.LocalMachine(), Meshperf: results.ThisBuild(), Recorded: now.UTC(),
		Ratios: map[string]Ratio{}}
	for _, r := range ratios {
		if !math.IsNaN(r.Value) {
			b.Ratios[r.Key] = r
		}
	}
	return b
}

// ReadBaseline reads a baseline file; a missing or undecodable file is an
// error that names it.
func ReadBaseline(path string) (Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Baseline{}, fmt.Errorf("baseline: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return Baseline{}, fmt.Errorf("baseline %s: %w", path, err)
	}
	if b.Bench == "" || len(b.Ratios) == 0 {
		return Baseline{}, fmt.Errorf("baseline %s: no bench name or no ratios", path)
	}
	return b, nil
}

// Write stores the baseline at path, whole or not at all. A CV that is
// unknown (one repeat) is written as null, which reads back as 0: no
// noise known, so the check's margin stays RegressionMargin.
func (b Baseline) Write(path string) error {
	data, err := results.MarshalNaN(b)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "  "); err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	out.WriteByte('\n')
	return atomicfile.Write(path, out.Bytes(), 0o644)
}

// RegressionMargin is the least a ratio must worsen, relative to its
// baseline, before the check calls it a regression, however quiet the runs:
// below it, a change is within what this machine's day-to-day drift moves a
// ratio.
const RegressionMargin = 0.10

// Regression is a ratio worse than its baseline beyond the margin.
type Regression struct {
	Key      string
	Baseline float64
	Now      float64
	Margin   float64 // the relative change it had to exceed
}

func (r Regression) String() string {
	return fmt.Sprintf("%s: %.2fx against the baseline's %.2fx (%+.0f%%, beyond the %.0f%% margin)",
		r.Key, r.Now, r.Baseline, 100*(r.Now/r.Baseline-1), 100*r.Margin)
}

// ErrNoCommonRatios is a check whose run shares no ratio with the
// baseline: it checked nothing, which must not pass as "no regression".
var ErrNoCommonRatios = errors.New("no ratio of this run is in the baseline")

// Check holds ratios against the baseline: a ratio regresses when it is
// worse than the baseline's by more than the larger of RegressionMargin and
// twice the noise of the two runs' ratios (each side's CV over the square
// root of its repeats, combined). A ratio the baseline lacks is skipped.
func (b Baseline) Check(ratios []Ratio) ([]Regression, error) {
	var out []Regression
	common := 0
	for _, r := range ratios {
		base, ok := b.Ratios[r.Key]
		if !ok || math.IsNaN(r.Value) || math.IsNaN(base.Value) || base.Value == 0 {
			continue
		}
		common++
		margin := max(RegressionMargin, 2*math.Hypot(ratioNoise(r), ratioNoise(base)))
		change := r.Value/base.Value - 1
		if r.HigherIsBetter {
			change = base.Value/r.Value - 1
		}
		if change > margin {
			out = append(out, Regression{Key: r.Key, Baseline: base.Value, Now: r.Value, Margin: margin})
		}
	}
	if common == 0 {
		return nil, ErrNoCommonRatios
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// ratioNoise is the relative standard error of a ratio of two medians,
// from each side's CV and repeats (a median's standard error is about 1.25
// times the mean's).
func ratioNoise(r Ratio) float64 {
	if r.Repeats < 2 {
		return 0
	}
	se := func(cv float64) float64 { return 1.25 * orZero(cv) / math.Sqrt(float64(r.Repeats)) }
	return math.Hypot(se(r.OursCV), se(r.PeerCV))
}
