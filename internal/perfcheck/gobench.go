package perfcheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"

	"github.com/meshperf/meshperf/internal/results"
)

// The file configuration keys perfcheck adds to Go's own (goos, goarch, pkg,
// cpu) so that a baseline says where and from what it was measured.
const (
	keyPkg       = "pkg"
	keyCPU       = "cpu" // written by go test itself
	keyCores     = "cores"
	keyMemory    = "memory"
	keyKernel    = "kernel"
	keyGo        = "go"
	keyDate      = "date"
	keyCommit    = "commit"
	keyBenchtime = "benchtime"
)

// comparedUnits are the measurements perfcheck judges, in table order, as
// benchfmt names them (it turns ns/op into sec/op). Each is better lower.
var comparedUnits = []string{"sec/op", "B/op", "allocs/op"}

// BenchSet is one package's Go benchmark results: every run of every
// benchmark with the file configuration Go printed before them.
type BenchSet struct {
	Pkg     string
	Results []*benchfmt.Result
}

// config is a file configuration value of the set ("" when absent).
func (s *BenchSet) config(key string) string {
	if len(s.Results) == 0 {
		return ""
	}
	return s.Results[0].GetConfig(key)
}

// Machine is where the set was measured, from its configuration lines.
func (s *BenchSet) Machine() results.Machine {
	cores, _ := strconv.Atoi(s.config(keyCores))
	mem, _ := strconv.Atoi(strings.TrimSuffix(s.config(keyMemory), " MB"))
	return results.Machine{CPUModel: s.config(keyCPU), CPUs: cores, MemoryMB: mem, Kernel: s.config(keyKernel)}
}

// sampleKey names one series of measurements: a benchmark (without the
// GOMAXPROCS suffix, so that sets from machines with other core counts still
// line up) and a unit.
type sampleKey struct{ name, unit string }

// samples returns the set's measurements of the compared units by benchmark
// and unit, and the benchmark names in the order Go ran them.
func (s *BenchSet) samples() (names []string, values map[sampleKey][]float64) {
	values = map[sampleKey][]float64{}
	for _, r := range s.Results {
		name := benchName(r.Name)
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
		for _, unit := range comparedUnits {
			if v, ok := r.Value(unit); ok {
				k := sampleKey{name, unit}
				values[k] = append(values[k], v)
			}
		}
	}
	return names, values
}

// goMaxProcsSuffix is the "-N" Go appends to a benchmark's name when
// GOMAXPROCS is not 1.
var goMaxProcsSuffix = regexp.MustCompile(`^-[0-9]+$`)

// benchName is a benchmark's full name (sub-benchmarks included) without
// its GOMAXPROCS suffix.
func benchName(n benchfmt.Name) string {
	base, parts := n.Parts()
	if len(parts) > 0 && goMaxProcsSuffix.Match(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1]
	}
	return string(base) + string(bytes.Join(parts, nil))
}

// readBenchSets parses Go benchmark output (go test -bench, or a baseline
// file) with benchfmt into one set per package, in the order they appear.
// Lines Go's format does not define (PASS, ok ...) are skipped, as benchfmt
// skips them; a line that looks like a benchmark result but does not parse
// is an error naming the file and line.
func readBenchSets(r io.Reader, fileName string) ([]*BenchSet, error) {
	var rd benchfmt.Reader
	rd.Reset(r, fileName)
	var sets []*BenchSet
	byPkg := map[string]*BenchSet{}
	var syntaxErrs []error
	for rd.Scan() {
		switch rec := rd.Result().(type) {
		case *benchfmt.SyntaxError:
			syntaxErrs = append(syntaxErrs, rec)
		case *benchfmt.Result:
			pkg := rec.GetConfig(keyPkg)
			s := byPkg[pkg]
			if s == nil {
				s = &BenchSet{Pkg: pkg}
				byPkg[pkg] = s
				sets = append(sets, s)
			}
			s.Results = append(s.Results, rec.Clone())
		}
	}
	if err := rd.Err(); err != nil {
		return nil, err
	}
	if len(syntaxErrs) > 0 {
		return nil, syntaxErrs[0]
	}
	return sets, nil
}

// GoRun says how to run a package tree's Go benchmarks.
type GoRun struct {
	Dir       string        // where go runs (the folder PATH named, or the current one)
	Pattern   string        // the package pattern: ".", "./..." or an import path pattern
	Bench     string        // -bench regexp
	Count     int           // -count
	Benchtime time.Duration // -benchtime
	Commit    string        // the commit of the measured tree, for the configuration lines
}

// runGoBenchmarks runs go test -bench on the run's packages one at a time
// (-p 1: no package is compiled while another's benchmarks run, which on a
// 2-core machine would take a core from them) and returns the sets by
// package. progress receives go's output as it comes, for a person waiting.
func runGoBenchmarks(ctx context.Context, run GoRun, m results.Machine, goVersion string) (map[string]*BenchSet, error) {
	log, err := os.CreateTemp("", "meshperf-perfcheck-*.txt")
	if err != nil {
		return nil, err
	}
	log.Close()
	defer os.Remove(log.Name())
	args := []string{"test", "-p", "1", "-run", "^$", "-bench", run.Bench, "-benchmem",
		"-count", strconv.Itoa(run.Count), "-benchtime", run.Benchtime.String(), run.Pattern}
	out, err := command(ctx, run.Dir, log.Name(), "go", args...)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, failureLines(out))
	}
	// The machine and the run's settings go first, as file configuration
	// lines in Go's format, so that every result carries them and a
	// baseline written from these results records them.
	var config strings.Builder
	for _, kv := range [][2]string{
		{keyCores, strconv.Itoa(m.CPUs)},
		{keyMemory, fmt.Sprintf("%d MB", m.MemoryMB)},
		{keyKernel, m.Kernel},
		{keyGo, goVersion},
		{keyDate, time.Now().UTC().Format(time.DateOnly)},
		{keyCommit, run.Commit},
		{keyBenchtime, run.Benchtime.String()},
	} {
		fmt.Fprintf(&config, "%s: %s\n", kv[0], kv[1])
	}
	sets, err := readBenchSets(io.MultiReader(strings.NewReader(config.String()), strings.NewReader(out)), "go test output")
	if err != nil {
		return nil, fmt.Errorf("reading go test's output: %w", err)
	}
	byPkg := make(map[string]*BenchSet, len(sets))
	for _, s := range sets {
		byPkg[s.Pkg] = s
	}
	return byPkg, nil
}

// failureLines picks from go test's output the lines that say why it
// failed (FAIL, panics, compile errors), at most 20 of them, leaving out
// the benchmark figures.
func failureLines(out string) string {
	var keep []string
	for line := range strings.Lines(out) {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "ok ") || strings.HasPrefix(line, "PASS") {
			continue
		}
		keep = append(keep, strings.TrimRight(line, "\n"))
	}
	if len(keep) > 20 {
		keep = keep[len(keep)-20:]
	}
	return strings.Join(keep, "\n")
}

// goBaselineName is the baseline file kept in each package folder that has
// benchmarks.
const goBaselineName = "bench.baseline"

// goBaselineHeader opens every baseline file: what it is and how to renew it.
const goBaselineHeader = `# Go benchmark baseline of this package (Go's benchmark format), written by
# meshperf perfcheck -update; meshperf perfcheck compares new runs with it.
# The configuration lines say where it was measured: figures are only
# comparable on the same machine (cpu, cores, memory).
`

// readGoBaseline reads a package's baseline file and checks it belongs to
// the package: a baseline of another benchmark set (copied from another
// folder, or renamed package) is an error, not a comparison.
func readGoBaseline(path, pkg string) (*BenchSet, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sets, err := readBenchSets(f, path)
	if err != nil {
		return nil, err
	}
	switch {
	case len(sets) == 0:
		return nil, fmt.Errorf("%s: no benchmark results in it (rewrite it with meshperf perfcheck -update)", path)
	case len(sets) > 1 || sets[0].Pkg != pkg:
		var pkgs []string
		for _, s := range sets {
			pkgs = append(pkgs, strconv.Quote(s.Pkg))
		}
		return nil, fmt.Errorf("%s: a baseline of another benchmark set: its pkg is %s, the folder holds %s", path, strings.Join(pkgs, ", "), pkg)
	}
	return sets[0], nil
}

// encodeGoBaseline is the baseline file of set: the header, then every run
// written back by benchfmt with its configuration lines.
func encodeGoBaseline(set *BenchSet) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(goBaselineHeader)
	w := benchfmt.NewWriter(&buf)
	for _, r := range set.Results {
		if err := w.Write(r); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// mergeForUpdate is the new baseline of a package when only some of its
// benchmarks ran (-bench selected them): the new runs, then the old
// baseline's runs of benchmarks that did not run, so that a partial update
// keeps the rest. The old runs keep their own configuration lines (date,
// commit), which benchfmt writes as a second block of the file.
func mergeForUpdate(old, current *BenchSet) *BenchSet {
	if old == nil {
		return current
	}
	ran := map[string]bool{}
	for _, r := range current.Results {
		ran[benchName(r.Name)] = true
	}
	merged := &BenchSet{Pkg: current.Pkg, Results: slices.Clone(current.Results)}
	for _, r := range old.Results {
		if ran[benchName(r.Name)] {
			continue
		}
		merged.Results = append(merged.Results, r)
	}
	return merged
}
