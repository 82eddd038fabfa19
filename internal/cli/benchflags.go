package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/bench"
	"github.com/meshperf/meshperf/internal/results"
)

// benchFlags are the flags every side-by-side benchmark has.
type benchFlags struct {
	repeats   int
	duration  time.Duration
	db        string
	jsonPath  string
	baseline  string
	update    string
	labels    string
	baselines bench.Baseline // -baseline's, read before anything runs
}

func (f *benchFlags) define(fs *flag.FlagSet, duration time.Duration) {
	positiveVar(fs, &f.repeats, "repeats", 5, "rounds: each runs every subject once, in a rotating order")
	durationVar(fs, &f.duration, "duration", duration, "how long each run lasts")
	fs.StringVar(&f.db, "db", filepath.Join("results", "meshperf.db"), "store every run in this results database (`PATH` or postgres:// URL); \"\" stores none")
	fs.StringVar(&f.jsonPath, "json", "", "write the cases, medians and ratios to this `file` as JSON")
	fs.StringVar(&f.baseline, "baseline", "", "check the ratios against this baseline `file`; exit 1 on a regression")
	fs.StringVar(&f.update, "update", "", "write the ratios to this baseline `file`")
	fs.StringVar(&f.labels, "labels", "", "labels recorded with every run (compare and history select runs by them)")
}

// check refuses bad flags and reads -baseline, before anything runs.
func (f *benchFlags) check() error {
	if f.duration <= 0 {
		return usagef("-duration must be more than 0")
	}
	if f.baseline != "" && f.update != "" {
		return usagef("-baseline checks a baseline and -update writes one: give one of them")
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

// finish does what every benchmark does with its results: store the runs,
// print the table, write -json, then -update the baseline or check it
// (a regression is a failure, each printed).
func (f *benchFlags) finish(runs []results.Run, ratios []bench.Ratio, report any, name string, stdout, stderr io.Writer,
	table func(io.Writer) error) error {
	if f.db != "" {
		st, err := openStore(f.db)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if err := st.Insert(r); err != nil {
				_ = st.Close()
				return fmt.Errorf("store the runs: %w", err)
			}
		}
		if err := st.Close(); err != nil {
			return err
		}
	}
	if err := table(stdout); err != nil {
		return err
	}
	if f.jsonPath != "" {
		data, err := results.MarshalNaN(report) // an unknown figure is null
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
		if err := bench.NewBaseline(name, ratios, time.Now()).Write(f.update); err != nil {
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
