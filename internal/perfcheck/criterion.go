package perfcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// The proxy's criterion benches: each is a [[bench]] of proxy/Cargo.toml,
// run in this order, one cargo invocation each, so that perfcheck knows
// which file each bench id came from.
var criterionBenches = []string{"routing", "headers", "telemetry"}

const (
	// criterionBaseline is the name of criterion's saved baseline
	// (--save-baseline / --baseline-lenient).
	criterionBaseline = "main"
	// rustBaselineDir is where the committed baseline lives, relative to
	// the proxy's folder: criterion's own files under criterion/, and
	// summary.json.
	rustBaselineDir = "benches/baseline"
)

// criterionFiles are the files of a saved criterion baseline, per bench.
var criterionFiles = []string{"benchmark.json", "estimates.json", "sample.json", "tukey.json"}

// criterionEstimate is one statistic of criterion's estimates.json: in
// <id>/<baseline>/ an absolute time in ns, in <id>/change/ a relative
// change (0.05 is 5% slower), each with its confidence interval.
type criterionEstimate struct {
	PointEstimate      float64 `json:"point_estimate"`
	ConfidenceInterval struct {
		ConfidenceLevel float64 `json:"confidence_level"`
		LowerBound      float64 `json:"lower_bound"`
		UpperBound      float64 `json:"upper_bound"`
	} `json:"confidence_interval"`
}

// criterionEstimates is the part of estimates.json perfcheck reads: both
// the absolute and the change files have a mean and a median; perfcheck
// judges the median, as it does for Go.
type criterionEstimates struct {
	Mean   criterionEstimate `json:"mean"`
	Median criterionEstimate `json:"median"`
}

// criterionBenchmark is benchmark.json: the bench's id as written in the
// code, and the folder criterion keeps it in.
type criterionBenchmark struct {
	FullID        string `json:"full_id"`
	DirectoryName string `json:"directory_name"`
}

// RustSummary is proxy/benches/baseline/summary.json: where and from what
// the committed criterion baseline was measured, and its medians (for a
// person reading the tree; perfcheck compares criterion's own files).
type RustSummary struct {
	Baseline string               `json:"baseline"`
	Date     string               `json:"date"`
	Commit   string               `json:"commit"`
	Rustc    string               `json:"rustc"`
	Machine  results.Machine      `json:"machine"`
	Benches  map[string]RustBench `json:"benches"` // by full id
}

// RustBench is one bench of the summary.
type RustBench struct {
	File     string  `json:"file"` // the bench file: routing, headers, telemetry
	Dir      string  `json:"dir"`  // criterion's folder for it, under criterion/
	MedianNS float64 `json:"median_ns"`
}

// criterionResult is what one criterion run left for one bench.
type criterionResult struct {
	id, dir  string
	current  criterionEstimates
	baseline *criterionEstimates // nil when it had no baseline
	change   *criterionEstimates // nil likewise
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readCriterionRun reads what criterion wrote under root (target/criterion)
// since a time: each bench whose new/benchmark.json is that recent, with
// its baseline and change estimates when they are as recent too (a change
// left by an older run is not this run's).
func readCriterionRun(root string, since time.Time) ([]criterionResult, error) {
	var found []criterionResult
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != "benchmark.json" || filepath.Base(filepath.Dir(path)) != "new" || !modifiedSince(path, since) {
			return nil
		}
		benchDir := filepath.Dir(filepath.Dir(path))
		var b criterionBenchmark
		if err := readJSON(path, &b); err != nil {
			return err
		}
		r := criterionResult{id: b.FullID, dir: filepath.ToSlash(relDir(root, benchDir))}
		if err := readJSON(filepath.Join(benchDir, "new", "estimates.json"), &r.current); err != nil {
			return err
		}
		if change := filepath.Join(benchDir, "change", "estimates.json"); modifiedSince(change, since) {
			r.change = &criterionEstimates{}
			if err := readJSON(change, r.change); err != nil {
				return err
			}
			r.baseline = &criterionEstimates{}
			if err := readJSON(filepath.Join(benchDir, criterionBaseline, "estimates.json"), r.baseline); err != nil {
				return err
			}
		}
		found = append(found, r)
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) && len(found) == 0 {
		return nil, fmt.Errorf("criterion wrote nothing under %s", root)
	}
	slices.SortFunc(found, func(a, b criterionResult) int { return strings.Compare(a.id, b.id) })
	return found, err
}

func modifiedSince(path string, t time.Time) bool {
	st, err := os.Stat(path)
	return err == nil && !st.ModTime().Before(t)
}

// criterionRow turns a bench's estimates into a row: the medians in
// seconds per iteration, and criterion's estimate of the median's change
// with its confidence interval, significant when the interval excludes no
// change (criterion's own test).
func criterionRow(r criterionResult, st Stats) Row {
	row := Row{Name: r.id, Unit: "sec/op", New: nsEstimate(r.current.Median), Change: math.NaN(), P: math.NaN(), Verdict: New}
	if r.change == nil {
		return row
	}
	c := r.change.Median
	row.Baseline = nsEstimate(r.baseline.Median)
	row.Change = c.PointEstimate
	row.ChangeLo, row.ChangeHi = c.ConfidenceInterval.LowerBound, c.ConfidenceInterval.UpperBound
	row.Significant = row.ChangeLo > 0 || row.ChangeHi < 0
	row.Verdict = judge(row.Significant, row.Change, st.Threshold)
	return row
}

func nsEstimate(e criterionEstimate) *Estimate {
	return &Estimate{Median: e.PointEstimate * 1e-9, Lo: e.ConfidenceInterval.LowerBound * 1e-9, Hi: e.ConfidenceInterval.UpperBound * 1e-9}
}

// rustPlan is the Rust side of a perfcheck run.
type rustPlan struct {
	proxyDir string
	summary  *RustSummary // the committed baseline's; nil when there is none
}

func (p *rustPlan) baselineDir() string  { return filepath.Join(p.proxyDir, rustBaselineDir) }
func (p *rustPlan) criterionDir() string { return filepath.Join(p.proxyDir, "target", "criterion") }

// loadRustPlan reads the committed baseline's summary and checks that the
// criterion files it lists are there; with readBaseline false (a full
// update, which replaces it) it only checks the proxy is there.
func loadRustPlan(proxyDir string, readBaseline bool) (*rustPlan, error) {
	p := &rustPlan{proxyDir: proxyDir}
	if _, err := os.Stat(filepath.Join(proxyDir, "Cargo.toml")); err != nil {
		return nil, fmt.Errorf("no Rust benches: %s has no Cargo.toml", proxyDir)
	}
	path := filepath.Join(p.baselineDir(), "summary.json")
	if _, err := os.Stat(path); !readBaseline || errors.Is(err, fs.ErrNotExist) {
		return p, nil
	}
	var s RustSummary
	if err := readJSON(path, &s); err != nil {
		return nil, err
	}
	if s.Baseline != criterionBaseline || len(s.Benches) == 0 {
		return nil, fmt.Errorf("%s: not a perfcheck baseline of criterion's %q (rewrite it with meshperf perfcheck -update)", path, criterionBaseline)
	}
	for id, b := range s.Benches {
		if !slices.Contains(criterionBenches, b.File) {
			return nil, fmt.Errorf("%s: bench %q is in %q, which is not one of the proxy's bench files (%s)", path, id, b.File, strings.Join(criterionBenches, ", "))
		}
		for _, f := range criterionFiles {
			if _, err := os.Stat(filepath.Join(p.baselineDir(), "criterion", b.Dir, criterionBaseline, f)); err != nil {
				return nil, fmt.Errorf("%s: bench %q: %w", path, id, err)
			}
		}
	}
	p.summary = &s
	return p, nil
}

// restore puts the committed baseline where criterion looks for it,
// removing any other saved "main" first, so that a bench the committed
// baseline lacks is reported new rather than compared with a stale local
// save.
func (p *rustPlan) restore() error {
	root := p.criterionDir()
	var stale []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == criterionBaseline {
			stale = append(stale, path)
			return filepath.SkipDir
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	for _, dir := range stale {
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if p.summary == nil {
		return nil
	}
	for _, b := range p.summary.Benches {
		if err := copyFiles(filepath.Join(p.baselineDir(), "criterion", b.Dir, criterionBaseline), filepath.Join(root, b.Dir, criterionBaseline)); err != nil {
			return err
		}
	}
	return nil
}

func copyFiles(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range criterionFiles {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// cargoBench runs one bench file with criterion's arguments and returns
// what it measured, read from criterion's files.
func (p *rustPlan) cargoBench(ctx context.Context, file string, criterionArgs ...string) ([]criterionResult, error) {
	log, err := os.CreateTemp("", "meshperf-perfcheck-cargo-*.txt")
	if err != nil {
		return nil, err
	}
	log.Close()
	defer os.Remove(log.Name())
	since := time.Now()
	args := append([]string{"bench", "--locked", "--bench", file, "--", "--noplot"}, criterionArgs...)
	if out, err := command(ctx, p.proxyDir, log.Name(), "cargo", args...); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, lastLines(out, 20))
	}
	return readCriterionRun(p.criterionDir(), since)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// compare runs every bench file against the restored baseline and returns
// a group of rows per file. filter is criterion's bench filter ("" for all);
// with one, benches of the baseline that did not run are not called gone.
func (p *rustPlan) compare(ctx context.Context, st Stats, filter string, progress func(string)) ([]Group, error) {
	if err := p.restore(); err != nil {
		return nil, fmt.Errorf("restoring the criterion baseline: %w", err)
	}
	var groups []Group
	for _, file := range criterionBenches {
		progress("cargo bench --bench " + file)
		args := []string{"--baseline-lenient", criterionBaseline, "--confidence-level", strconv.FormatFloat(st.Confidence, 'g', -1, 64)}
		if filter != "" {
			args = append(args, filter)
		}
		results, err := p.cargoBench(ctx, file, args...)
		if err != nil {
			return nil, err
		}
		g := Group{Name: "proxy/benches/" + file + ".rs", Lang: "rust", Baseline: "proxy/" + rustBaselineDir}
		ran := map[string]bool{}
		for _, r := range results {
			ran[r.id] = true
			g.Rows = append(g.Rows, criterionRow(r, st))
		}
		if p.summary != nil {
			g.BaselineDate, g.BaselineCommit = p.summary.Date, p.summary.Commit
			if filter == "" {
				for _, id := range sortedKeys(p.summary.Benches) {
					if b := p.summary.Benches[id]; b.File == file && !ran[id] {
						g.Rows = append(g.Rows, Row{Name: id, Unit: "sec/op", Baseline: &Estimate{Median: b.MedianNS * 1e-9, Lo: math.Inf(-1), Hi: math.Inf(1)},
							Change: math.NaN(), P: math.NaN(), Verdict: Gone})
					}
				}
			}
		}
		groups = append(groups, g)
	}
	return groups, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// update runs every bench file saving criterion's baseline, then copies it
// into the committed baseline with its summary. With a filter, the benches
// that did not run keep their committed files.
func (p *rustPlan) update(ctx context.Context, filter string, m results.Machine, commit string, progress func(string)) (string, int, error) {
	benches := map[string]RustBench{}
	if p.summary != nil && filter != "" {
		maps.Copy(benches, p.summary.Benches)
	}
	var fresh []string
	for _, file := range criterionBenches {
		progress("cargo bench --bench " + file + " (saving the baseline)")
		args := []string{"--save-baseline", criterionBaseline}
		if filter != "" {
			args = append(args, filter)
		}
		results, err := p.cargoBench(ctx, file, args...)
		if err != nil {
			return "", 0, err
		}
		for _, r := range results {
			benches[r.id] = RustBench{File: file, Dir: r.dir, MedianNS: math.Round(r.current.Median.PointEstimate*10) / 10}
			fresh = append(fresh, r.id)
		}
	}
	if filter == "" {
		if err := os.RemoveAll(filepath.Join(p.baselineDir(), "criterion")); err != nil {
			return "", 0, err
		}
	}
	for _, id := range fresh {
		dir := benches[id].Dir
		if err := copyFiles(filepath.Join(p.criterionDir(), dir, criterionBaseline), filepath.Join(p.baselineDir(), "criterion", dir, criterionBaseline)); err != nil {
			return "", 0, err
		}
	}
	rustc, err := command(ctx, p.proxyDir, "", "rustc", "--version")
	if err != nil {
		return "", 0, err
	}
	s := RustSummary{Baseline: criterionBaseline, Date: time.Now().UTC().Format(time.DateOnly), Commit: commit,
		Rustc: strings.TrimSpace(rustc), Machine: m, Benches: benches}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", 0, err
	}
	path := filepath.Join(p.baselineDir(), "summary.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return "", 0, err
	}
	return path, len(fresh), nil
}
