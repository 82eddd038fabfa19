package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/changepoint"
	"github.com/meshperf/meshperf/internal/history"
	"github.com/meshperf/meshperf/internal/results"
)

// History runs `meshperf history [SCENARIO] [flags]`: the series of one
// figure of a scenario across the lab's invocations on one machine, with
// its change points found by E-Divisive means. Exit status: 0 done, 1 the
// newest change point beyond the threshold is a regression (so CI can gate
// on it) or the store could not be read, 2 bad input or too few points.
func History(args []string, stdout, stderr io.Writer) int {
	c := newHistoryCommand()
	err := c.run(args, stdout, stderr)
	if errors.Is(err, errRegressed) {
		return exitFailed
	}
	return c.exit(stderr, err)
}

// errRegressed ends a history whose newest change point is a regression;
// the output has said so already.
var errRegressed = errors.New("regression")

type historyCommand struct {
	*command
	db, metric, by, mode, machine string
	qps, conn                     int
	thresholdPercent              float64
	options                       changepoint.Options
	json                          bool
}

func newHistoryCommand() *historyCommand {
	c := &historyCommand{command: newCommand("meshperf history", "[SCENARIO] [flags]",
		"Shows a scenario's figure across the lab's invocations on one machine, one point per invocation (the median of\n"+
			"its repetitions), and finds where it changed with E-Divisive means and a permutation test; each change beyond\n"+
			"the threshold is a regression or an improvement between the versions (commits, dates) on either side of it.\n"+
			"Exits 1 when the newest such change is a regression. Without SCENARIO, lists the scenarios the store holds."),
		options: changepoint.DefaultOptions()}
	fs := c.flags
	fs.StringVar(&c.db, "db", filepath.Join("results", "meshperf.db"), "results database `path`")
	fs.StringVar(&c.metric, "metric", "p99", "the `figure`: "+history.MetricNames())
	fs.StringVar(&c.by, "by", string(history.ByVersion), "label points by `grouping`: version (the data plane's, else meshperf's), commit (meshperf's) or date")
	fs.StringVar(&c.mode, "mode", "", "the `mode` (default: both-sidecars if it ran, else the first mesh mode)")
	countVar(fs, &c.qps, "qps", 0, "the requested rate, 0 for max (default: the only one the mode ran at)")
	countVar(fs, &c.conn, "conn", 0, "the connections (default: the only count the mode ran with)")
	fs.StringVar(&c.machine, "machine", "", "the machine `key`, as the output names it (default: this machine if it has runs, else the one with most)")
	rateVar(fs, &c.thresholdPercent, "threshold", 100*c.options.Threshold, "a significant change smaller than this `percent` is a shift, not a regression")
	rateVar(fs, &c.options.Significance, "significance", c.options.Significance, "the permutation test's `p-value` at or below which a change point is kept")
	positiveVar(fs, &c.options.Permutations, "permutations", c.options.Permutations, "shuffles in each permutation test")
	intVar(fs, &c.options.MinSegment, "min-segment", c.options.MinSegment, 2, 0, "the fewest points on each side of a change point")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	return c
}

func (c *historyCommand) run(args []string, stdout, stderr io.Writer) error {
	q, err := c.parse(args, stdout)
	if err != nil {
		return err
	}
	st, err := openExistingStore(c.db)
	if err != nil {
		return err
	}
	defer st.Close()
	if q.Scenario == "" {
		return listScenarios(st, c.db, stdout)
	}
	runs, err := st.Runs(results.Filter{Scenario: q.Scenario})
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return c.unknownScenario(st, q.Scenario)
	}
	series, err := history.Build(runs, q)
	if err != nil {
		return selectionError(err)
	}
	a, analyzeErr := history.Analyze(series, c.options)
	if analyzeErr != nil && !errors.Is(analyzeErr, history.ErrTooFewPoints) {
		return analyzeErr
	}
	if c.json {
		err = history.WriteJSON(stdout, a)
	} else {
		err = history.WriteTable(stdout, a)
	}
	switch {
	case err != nil:
		return err
	case analyzeErr != nil:
		return inputError{analyzeErr} // the series is printed; too short to analyze
	case a.Regressed():
		newest := a.Changes[len(a.Changes)-1]
		_, _ = fmt.Fprintf(stderr, "%s: regression: %s -> %s, %s %+.1f%%\n", c.name, newest.GroupBefore, newest.GroupAfter, series.Metric.Name, 100*newest.Relative)
		return errRegressed
	}
	return nil
}

// parse reads the command line into a query; every error is bad input.
func (c *historyCommand) parse(args []string, stdout io.Writer) (history.Query, error) {
	positional, err := c.command.parse(args, stdout)
	if err != nil {
		return history.Query{}, err
	}
	if len(positional) > 1 {
		return history.Query{}, usagef("one scenario at a time, got %q", positional)
	}
	q := history.Query{Mode: c.mode, Machine: c.machine, QPS: -1, Connections: -1, Local: results.LocalMachine()}
	if len(positional) == 1 {
		q.Scenario = positional[0]
	}
	if q.Metric, err = history.LookupMetric(c.metric); err != nil {
		return q, usageError{err.Error()}
	}
	if q.By, err = history.ParseGroupBy(c.by); err != nil {
		return q, usageError{err.Error()}
	}
	c.flags.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "qps":
			q.QPS = c.qps
		case "conn":
			q.Connections = c.conn
		}
	})
	c.options.Threshold = c.thresholdPercent / 100
	if err := c.options.Validate(); err != nil {
		return q, usageError{err.Error()}
	}
	return q, nil
}

// openExistingStore opens a results database that must exist already:
// history reads, and opening a mistyped path would create an empty one.
func openExistingStore(path string) (*results.Store, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, inputError{fmt.Errorf("results database %s: %w (meshperf lab run stores runs there; -db names another)", path, errors.Unwrap(err))}
	}
	st, err := results.Open(path)
	if err != nil {
		return nil, inputError{err}
	}
	return st, nil
}

func listScenarios(st *results.Store, db string, stdout io.Writer) error {
	scenarios, err := st.Scenarios()
	if err != nil {
		return err
	}
	if len(scenarios) == 0 {
		_, err := fmt.Fprintf(stdout, "%s holds no lab runs\n", db)
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tinvocations\truns\tfirst\tlast")
	for _, s := range scenarios {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", s.Scenario, s.Invocations, s.Runs,
			s.First.Format("2006-01-02 15:04"), s.Last.Format("2006-01-02 15:04"))
	}
	return tw.Flush()
}

func (c *historyCommand) unknownScenario(st *results.Store, name string) error {
	scenarios, err := st.Scenarios()
	if err != nil {
		return err
	}
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.Scenario
	}
	held := "no lab runs"
	if len(names) > 0 {
		held = "runs of " + strings.Join(names, ", ")
	}
	return inputError{fmt.Errorf("unknown scenario %q: %s holds %s", name, c.db, held)}
}

// selectionError makes history's selection errors bad input.
func selectionError(err error) error {
	var se history.SelectionError
	if errors.As(err, &se) {
		return inputError{err}
	}
	return err
}
