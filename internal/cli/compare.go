package cli

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/results"
)

// Compare runs `meshperf compare A B`: whether B performs differently from
// A, with statistics, as a table, JSON or an HTML page. Exit status: 0 no
// row worse, 1 some row worse (or a failure), 2 bad input.
func Compare(args []string, stdout, stderr io.Writer) int {
	cmd := newCompareCommand()
	a, b, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	status, err := cmd.run(a, b, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	return status
}

// compareCommand is compare's command line.
type compareCommand struct {
	*command
	db         string
	confidence float64 // a fraction (0.95)
	threshold  float64 // a fraction (0.05)
	json       bool
	html       string
	failOn     string
}

func newCompareCommand() *compareCommand {
	c := &compareCommand{command: newCommand("meshperf compare", "A B [flags]",
		"Compares B's runs against A's: for each mode, protocol, rate, connections and payload both measured, the latency\n"+
			"percentiles, the latency added against no-mesh and each kind of proxy's vCPU per 1000 rps and MB, each side's\n"+
			"repetitions, the difference B-A with Welch's confidence interval, and a verdict: worse, better or ~ (no\n"+
			"significant change beyond the threshold). A and B are run ids, load result files, lab output directories or\n"+
			"labels; a side's repetitions pool over all the invocations it names. Exit status 1 when a row is worse.")}
	flags := c.flags
	flags.StringVar(&c.db, "db", filepath.Join("results", "meshperf.db"), "results database (`path` or postgres:// URL) to look run ids and labels up in")
	percentVar(flags, &c.confidence, "confidence", compare.DefaultOptions.Confidence*100, true, "confidence level of the intervals, `percent` (more than 0, less than 100)")
	percentVar(flags, &c.threshold, "threshold", compare.DefaultOptions.ThresholdPct, false, "smallest change, `percent` of A, called worse or better")
	flags.BoolVar(&c.json, "json", false, "print the comparison as JSON (docs/tracking.md gives the schema) instead of the table")
	flags.StringVar(&c.html, "html", "", "also write the comparison as a standalone HTML page to `file`")
	flags.StringVar(&c.failOn, "fail-on", "worse", "`when` to exit 1: worse (a row is worse) or none (never)")
	return c
}

// parse reads the command line: the two selectors.
func (c *compareCommand) parse(args []string, stdout io.Writer) (string, string, error) {
	positional, err := c.command.parse(args, stdout)
	if err != nil {
		return "", "", err
	}
	switch {
	case len(positional) < 2:
		return "", "", usagef("want two sides, A and B (run ids, result files, lab output directories or labels), got %d", len(positional))
	case len(positional) > 2:
		return "", "", usagef("unexpected argument %q: meshperf compare takes two sides, A and B", positional[2])
	case c.failOn != "worse" && c.failOn != "none":
		return "", "", usagef("-fail-on %q: want worse or none", c.failOn)
	}
	return positional[0], positional[1], nil
}

func (c *compareCommand) run(selA, selB string, stdout io.Writer) (int, error) {
	st, err := openStoreIfExists(c.db)
	if err != nil {
		return exitFailed, err
	}
	if st != nil {
		defer st.Close()
	}
	var sides [2]compare.Side
	for i, sel := range []string{selA, selB} {
		runs, err := results.Resolve(st, sel)
		if err != nil {
			return exitBadInput, inputError{fmt.Errorf("side %s: %w", "AB"[i:i+1], err)}
		}
		sides[i] = compare.Side{Selector: sel, Runs: runs}
	}
	rep := compare.Compare(sides[0], sides[1], compare.Options{Confidence: c.confidence, ThresholdPct: c.threshold * 100})
	if c.html != "" {
		var page bytes.Buffer
		if err := compare.WriteHTML(&page, rep); err != nil {
			return exitFailed, err
		}
		if err := atomicfile.Write(c.html, page.Bytes(), 0o644); err != nil {
			return exitFailed, fmt.Errorf("write %s: %w", c.html, err)
		}
	}
	write := compare.WriteTable
	if c.json {
		write = compare.WriteJSON
	}
	if err := write(stdout, rep); err != nil {
		return exitFailed, err
	}
	if rep.Verdict == compare.VerdictWorse && c.failOn == "worse" {
		return exitFailed, nil
	}
	return exitOK, nil
}
