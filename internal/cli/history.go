package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
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
	cpload, params                string
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
			"Exits 1 when the newest such change is a regression. Without SCENARIO, lists the scenarios the store holds.\n"+
			"With -cpload SHAPE, the same for the control-plane load tests cpload stored (cpload run -db), one point per run."),
		options: changepoint.DefaultOptions()}
	fs := c.flags
	fs.StringVar(&c.db, "db", filepath.Join("results", "meshperf.db"), "results database: a `path` or a postgres:// URL")
	fs.StringVar(&c.metric, "metric", "p99", "the `figure`: "+history.MetricNames(false)+"; with -cpload one of "+history.MetricNames(true)+
		", and "+history.DefaultControlPlaneMetric+" unless set")
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
	fs.StringVar(&c.cpload, "cpload", "", "follow the cpload runs of this mesh `shape` instead of a lab scenario")
	fs.StringVar(&c.params, "params", "", "with -cpload, the runs of these parameters (the `hash` the output names; default: the shape's only ones)")
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
	if q.Scenario == "" && c.cpload == "" {
		return listScenarios(st, stdout)
	}
	series, err := c.series(st, q)
	if err != nil {
		return err
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
		_, _ = fmt.Fprintf(stderr, "%s: regression: %s -> %s, %s %s\n", c.name, newest.GroupBefore, newest.GroupAfter, series.Metric.Name, newest.Size())
		return errRegressed
	}
	return nil
}

// series reads the query's series from the store: a lab scenario's, or
// with -cpload a shape's.
func (c *historyCommand) series(st *results.Store, q history.Query) (history.Series, error) {
	if c.cpload != "" {
		runs, err := st.ControlPlaneRuns()
		if err != nil {
			return history.Series{}, err
		}
		s, err := history.BuildControlPlane(runs, history.ControlPlaneQuery{Shape: c.cpload, Metric: q.Metric, By: q.By,
			Machine: q.Machine, Local: q.Local, ParamsHash: c.params})
		return s, selectionError(err)
	}
	runs, err := st.Runs(results.Filter{Scenario: q.Scenario})
	if err != nil {
		return history.Series{}, err
	}
	if len(runs) == 0 {
		return history.Series{}, c.unknownScenario(st, q.Scenario)
	}
	s, err := history.Build(runs, q)
	return s, selectionError(err)
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
	set := map[string]bool{}
	c.flags.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["qps"] {
		q.QPS = c.qps
	}
	if set["conn"] {
		q.Connections = c.conn
	}
	if c.cpload != "" && !set["metric"] {
		c.metric = history.DefaultControlPlaneMetric
	}
	if q.Metric, err = history.LookupMetric(c.metric); err != nil {
		return q, usageError{err.Error()}
	}
	if err := c.checkCploadFlags(q, set); err != nil {
		return q, err
	}
	if q.By, err = history.ParseGroupBy(c.by); err != nil {
		return q, usageError{err.Error()}
	}
	c.options.Threshold = c.thresholdPercent / 100
	if err := c.options.Validate(); err != nil {
		return q, usageError{err.Error()}
	}
	return q, nil
}

// checkCploadFlags refuses what does not go with -cpload, or without it.
func (c *historyCommand) checkCploadFlags(q history.Query, set map[string]bool) error {
	if c.cpload == "" {
		switch {
		case q.Metric.ControlPlane():
			return usagef("metric %s is a cpload figure: follow a shape with -cpload SHAPE", q.Metric.Name)
		case set["params"]:
			return usagef("-params picks cpload runs: it goes with -cpload SHAPE")
		}
		return nil
	}
	switch {
	case q.Scenario != "":
		return usagef("-cpload %s follows a shape, not a lab scenario: drop %q", c.cpload, q.Scenario)
	case !q.Metric.ControlPlane():
		return usagef("metric %s is a lab figure: with -cpload, want one of %s", q.Metric.Name, history.MetricNames(true))
	}
	for _, lab := range []string{"mode", "qps", "conn"} {
		if set[lab] {
			return usagef("-%s picks lab runs: it does not go with -cpload", lab)
		}
	}
	return nil
}

// openExistingStore opens a results database that must exist already:
// history reads, and opening a mistyped path would create an empty one. A
// file that is not a results database is bad input; a server that cannot
// be reached is a failure.
func openExistingStore(db string) (*results.Store, error) {
	if err := checkStoreExists(db); err != nil {
		return nil, err
	}
	st, err := results.Open(db)
	if loc, _ := results.ParseLocation(db); err != nil && loc.IsFile() {
		return nil, inputError{err}
	}
	return st, err
}

// openStoreIfExists opens the results database when there is one, and
// returns nil when there is none: reading result files or lab directories
// needs no database, and a mistyped -db must not leave an empty one behind.
// A PostgreSQL URL names a database the user means: it is opened.
func openStoreIfExists(db string) (*results.Store, error) {
	loc, err := results.ParseLocation(db)
	if err != nil {
		return nil, inputError{err}
	}
	if loc.IsFile() {
		if _, err := os.Stat(loc.File); errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		} else if err != nil {
			return nil, inputError{fmt.Errorf("-db %s: %w", loc, err)}
		}
	}
	return results.Open(db)
}

// openStore opens the results database commands store runs in, creating
// a SQLite file (and its directory) that is not there yet. A -db that
// names no database is bad input; one that cannot be opened a failure.
func openStore(db string) (*results.Store, error) {
	loc, err := results.ParseLocation(db)
	if err != nil {
		return nil, inputError{err}
	}
	if loc.IsFile() {
		if err := os.MkdirAll(filepath.Dir(loc.File), 0o755); err != nil {
			return nil, err
		}
	}
	return results.Open(db)
}

// checkStoreExists refuses a -db that names no database, or a results
// database path where there is none (bad input): opening it would create
// an empty database. Whether a PostgreSQL database exists is learnt on
// connecting.
func checkStoreExists(db string) error {
	loc, err := results.ParseLocation(db)
	if err != nil {
		return inputError{err}
	}
	if !loc.IsFile() {
		return nil
	}
	if _, err := os.Stat(loc.File); err != nil {
		return inputError{fmt.Errorf("results database %s: %w (meshperf lab run stores runs there; -db names another)", loc, errors.Unwrap(err))}
	}
	return nil
}

func listScenarios(st *results.Store, stdout io.Writer) error {
	scenarios, err := st.Scenarios()
	if err != nil {
		return err
	}
	if len(scenarios) == 0 {
		_, err := fmt.Fprintf(stdout, "%s holds no lab runs\n", st)
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
	return inputError{fmt.Errorf("unknown scenario %q: %s holds %s", name, st, held)}
}

// selectionError makes history's selection errors bad input; nil stays
// nil.
func selectionError(err error) error {
	var se history.SelectionError
	if errors.As(err, &se) {
		return inputError{err}
	}
	return err
}
