package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/results"
)

// benchFlags are the flags every side-by-side benchmark (bench proxy,
// pilot, load) has, and what each does with its results once they are in:
// the table is the benchmark's own; -json, -update and -baseline are
// handled here, the same for all three.
type benchFlags struct {
	name      string // the benchmark's: "proxy", "pilot", "load"
	repeats   int
	db        string
	jsonPath  string
	baseline  string
	update    string
	labels    string
	baselines bench.Baseline // -baseline's, read before anything runs
}

func (f *benchFlags) define(fs *flag.FlagSet, name string) {
	f.name = name
	positiveVar(fs, &f.repeats, "repeats", 5, "rounds: each runs every subject once, in a rotating order")
	fs.StringVar(&f.db, "db", defaultResultsDB, "store every run in this results database (`PATH` or postgres:// URL); \"\" stores none")
	fs.StringVar(&f.jsonPath, "json", "", "write the cases, medians and ratios to this `file` as JSON")
	fs.StringVar(&f.baseline, "baseline", "", "check the ratios against this baseline `file`; exit 1 on a regression")
	fs.StringVar(&f.update, "update", "", fmt.Sprintf("write the ratios as the baseline `file` (benchmarks/bench/%s.baseline.json is the committed one)", name))
	fs.StringVar(&f.labels, "labels", "", "labels recorded with every run (compare and history select runs by them)")
}

// check refuses bad flags and reads -baseline, before anything runs.
func (f *benchFlags) check() error {
	if f.baseline != "" && f.update != "" {
		return usagef("-baseline checks a baseline and -update writes one: give one of them")
	}
	if f.update != "" && f.repeats < 2 {
		return usagef("-update needs -repeats 2 or more: a baseline keeps the repeats' noise beside each ratio")
	}
	if err := checkStoreLocation(f.db); err != nil {
		return err
	}
	if f.baseline != "" {
		b, err := bench.ReadBaseline(f.baseline)
		if err != nil {
			return inputError{err}
		}
		f.baselines = b
	}
	return nil
}

// openStore opens -db for the runs, nil when -db is "".
func (f *benchFlags) openStore() (*results.Store, error) {
	if f.db == "" {
		return nil, nil
	}
	return openStore(f.db)
}

// storeRuns stores the runs in -db, when there is one.
func (f *benchFlags) storeRuns(runs []results.Run) error {
	st, err := f.openStore()
	if err != nil || st == nil {
		return err
	}
	for _, r := range runs {
		if err := st.Insert(r); err != nil {
			_ = st.Close()
			return fmt.Errorf("store the runs: %w", err)
		}
	}
	return st.Close()
}

// finish does what every benchmark does once its table is printed: write
// -json (an unknown figure as null), then -update the baseline or check
// it (a regression is a failure, each printed).
func (f *benchFlags) finish(ratios []bench.Ratio, report any, stdout, stderr io.Writer) error {
	if f.jsonPath != "" {
		data, err := results.MarshalNaN(report)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		if err := json.Indent(&out, data, "", "  "); err != nil {
			return err
		}
		out.WriteByte('\n')
		if err := atomicfile.Write(f.jsonPath, out.Bytes(), 0o644); err != nil {
			return fmt.Errorf("-json: %w", err)
		}
	}
	if f.update != "" {
		if err := bench.NewBaseline(f.name, ratios, time.Now()).Write(f.update); err != nil {
			return err
		}
		_, _ = fmt.Fprintf(stdout, "baseline written to %s\n", f.update)
	}
	if f.baseline == "" {
		return nil
	}
	regressions, err := f.baselines.Check(ratios)
	if errors.Is(err, bench.ErrNoCommonRatios) {
		return fmt.Errorf("-baseline %s: %w", f.baseline, err)
	}
	if err != nil {
		return err
	}
	for _, r := range regressions {
		_, _ = fmt.Fprintf(stderr, "regression: %s\n", r)
	}
	if len(regressions) > 0 {
		return fmt.Errorf("%d ratio(s) regressed against %s", len(regressions), f.baseline)
	}
	_, _ = fmt.Fprintf(stdout, "no regression against %s\n", f.baseline)
	return nil
}
