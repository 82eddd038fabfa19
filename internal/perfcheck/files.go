package perfcheck

import (
	"fmt"
	"os"

	"github.com/meshperf/meshperf/internal/results"
)

// CompareFiles compares two files of Go benchmark output (what `go test
// -bench` prints, several runs appended) with the same statistics as
// Check: old stands for the baseline, new for the current results. This
// is how two builds are compared on one machine, each run interleaved with
// the other's so that both see the same noise (scripts/regression), where a
// committed baseline, measured another day, would compare the days as much
// as the code. The report's machine is new's.
func CompareFiles(oldPath, newPath string, st Stats) (*Report, error) {
	read := func(path string) ([]*BenchSet, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, InputError{err}
		}
		defer f.Close()
		sets, err := readBenchSets(f, path)
		if err != nil {
			return nil, inputErrorf("%s: %w", path, err)
		}
		if len(sets) == 0 {
			return nil, inputErrorf("%s: no Go benchmark results in it", path)
		}
		return sets, nil
	}
	oldSets, err := read(oldPath)
	if err != nil {
		return nil, err
	}
	newSets, err := read(newPath)
	if err != nil {
		return nil, err
	}
	oldByPkg := map[string]*BenchSet{}
	for _, s := range oldSets {
		oldByPkg[s.Pkg] = s
	}
	r := &Report{Machine: newSets[0].Machine(), Confidence: st.Confidence, Threshold: st.Threshold}
	if r.Machine.Key() == "" {
		// go test's own output names the CPU only; this machine ran it.
		r.Machine = results.LocalMachine()
	}
	seen := map[string]bool{}
	for _, cur := range newSets {
		seen[cur.Pkg] = true
		g := Group{Name: cur.Pkg, Lang: "go", Baseline: oldPath}
		g.Rows = compareSets(oldByPkg[cur.Pkg], cur, st, true)
		r.Groups = append(r.Groups, g)
	}
	for _, old := range oldSets {
		if !seen[old.Pkg] {
			r.Groups = append(r.Groups, Group{Name: old.Pkg, Lang: "go", Baseline: oldPath, Rows: compareSets(old, nil, st, true)})
		}
	}
	if len(r.Groups) == 0 {
		return nil, fmt.Errorf("nothing to compare between %s and %s", oldPath, newPath)
	}
	r.count()
	return r, nil
}
