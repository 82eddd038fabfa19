package results

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Resolve turns a command-line selector into runs, trying in order:
//   - a run id in the store (every run of that invocation);
//   - a path: a load result file (Fortio's or meshperf's JSON), or a lab
//     output directory, whose <runid>.csv names the invocation to read
//     from the store;
//   - a label: runs whose provenance labels equal it, else the run whose
//     Istio label (<runid>_qps_...) equals it.
//
// st may be nil when only files are to be read. The error names what was
// tried, so a typo reads as one line.
func Resolve(st *Store, arg string) ([]Run, error) {
	if arg == "" {
		return nil, errors.New("empty run selector: want a run id, a result file, a lab output directory or a label")
	}
	if st != nil {
		if runs, err := st.Runs(Filter{RunID: arg}); err != nil || len(runs) > 0 {
			return runs, err
		}
	}
	switch info, err := os.Stat(arg); {
	case err == nil && info.IsDir():
		return resolveLabDir(st, arg)
	case err == nil:
		r, err := ReadFortioFile(arg)
		if err != nil {
			return nil, err
		}
		return []Run{r}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("read %s: %w", arg, err)
	}
	if st != nil {
		if runs, err := st.runsLabelled(arg); err != nil || len(runs) > 0 {
			return runs, err
		}
		return nil, fmt.Errorf("no run matches %q: not a run id or label in %s, nor a file or directory", arg, st.where)
	}
	return nil, fmt.Errorf("no run matches %q: not a file or directory (and no results database to look up run ids and labels in)", arg)
}

// ResolveStored is Resolve without the paths: a run id or a label, looked
// up in the store only. A server answering selectors from the network uses
// it, so that a request cannot make it read files from its disk.
func ResolveStored(st *Store, arg string) ([]Run, error) {
	if arg == "" {
		return nil, errors.New("empty run selector: want a run id or a label")
	}
	if runs, err := st.Runs(Filter{RunID: arg}); err != nil || len(runs) > 0 {
		return runs, err
	}
	if runs, err := st.runsLabelled(arg); err != nil || len(runs) > 0 {
		return runs, err
	}
	return nil, fmt.Errorf("%w %q: not a run id or label in %s", ErrNoRunMatches, arg, st.where)
}

// ErrNoRunMatches is ResolveStored's error for a selector that names no
// stored run, told apart from a store that cannot be read.
var ErrNoRunMatches = errors.New("no run matches")

// runsLabelled are the runs whose provenance labels equal label, else the
// run whose Istio label (<runid>_qps_...) does.
func (s *Store) runsLabelled(label string) ([]Run, error) {
	if runs, err := s.Runs(Filter{Labels: label}); err != nil || len(runs) > 0 {
		return runs, err
	}
	return s.runsWhere("label = ?", label)
}

// resolveLabDir reads the invocation a lab output directory holds from the
// store: the directory's CSV is named after its run id.
func resolveLabDir(st *Store, dir string) ([]Run, error) {
	csvs, _ := filepath.Glob(filepath.Join(dir, "*.csv"))
	if len(csvs) != 1 {
		return nil, fmt.Errorf("%s: not a lab output directory (want one <runid>.csv in it, found %d)", dir, len(csvs))
	}
	runID := strings.TrimSuffix(filepath.Base(csvs[0]), ".csv")
	if st == nil {
		return nil, fmt.Errorf("%s: lab run %s needs the results database it was stored in", dir, runID)
	}
	runs, err := st.Runs(Filter{RunID: runID})
	if err == nil && len(runs) == 0 {
		err = fmt.Errorf("%s: lab run %s is not in %s (pass the -db it was stored in)", dir, runID, st.where)
	}
	return runs, err
}
