package results

import (
	"fmt"
	"time"
)

// Copied is what Copy did: rows written, and rows skipped because the
// destination held them already.
type Copied struct {
	Runs, RunsSkipped                         int
	ControlPlaneRuns, ControlPlaneRunsSkipped int
	Sweeps, SweepsSkipped                     int
}

// Copy copies every run (with its processes, percentiles, provenance and,
// over a service graph, its graph figures), every sweep's analysis and
// every control-plane run of src into dst, in one transaction on dst: all of it lands, or none. It can be run again: a run dst already holds
// is skipped, a run being the same invocation, label and start time
// (run_id, label, start_unix_ns), a sweep the same invocation (run_id), a
// control-plane run the same label,
// shape and start time, so that moving history twice, or merging two
// machines' stores into one, never duplicates a row.
func Copy(dst, src *Store) (Copied, error) {
	var n Copied
	runs, err := src.Runs(Filter{})
	if err != nil {
		return n, err
	}
	cpRuns, err := src.ControlPlaneRuns()
	if err != nil {
		return n, err
	}
	sweeps, err := src.Sweeps()
	if err != nil {
		return n, err
	}
	err = dst.inTx(func(c conn) error {
		var err error
		n.Runs, n.RunsSkipped, err = copyRows(c, runs, func(r Run) (string, []any) {
			return `SELECT COUNT(*) FROM runs WHERE run_id = ? AND label = ? AND start_unix_ns = ?`,
				[]any{r.RunID, r.Label, r.StartTime.UnixNano()}
		}, insertRun, func(r Run) string { return "run " + r.Label + " (" + r.StartTime.Format(time.RFC3339) + ")" })
		if err != nil {
			return err
		}
		n.Sweeps, n.SweepsSkipped, err = copyRows(c, sweeps, func(sw Sweep) (string, []any) {
			return `SELECT COUNT(*) FROM run_sweeps WHERE run_id = ?`, []any{sw.RunID}
		}, insertSweep, func(sw Sweep) string { return "the sweep of run " + sw.RunID })
		if err != nil {
			return err
		}
		n.ControlPlaneRuns, n.ControlPlaneRunsSkipped, err = copyRows(c, cpRuns, func(r ControlPlaneRun) (string, []any) {
			return `SELECT COUNT(*) FROM cp_runs WHERE label = ? AND shape = ? AND start_unix_ns = ?`,
				[]any{r.Label, r.Shape, r.Start.UnixNano()}
		}, insertControlPlaneRun, func(r ControlPlaneRun) string {
			return "control-plane run " + r.Label + " (" + r.Start.Format(time.RFC3339) + ")"
		})
		return err
	})
	if err != nil {
		return Copied{}, fmt.Errorf("copy %s to %s: %w", src.where, dst.where, err)
	}
	return n, nil
}

// copyRows inserts each row the destination does not hold yet: held is
// the query, and its arguments, counting the rows with the row's identity.
func copyRows[T any](c conn, rows []T, held func(T) (string, []any), insert func(conn, T) error, name func(T) string) (copied, skipped int, err error) {
	for _, r := range rows {
		query, args := held(r)
		var n int
		if err := c.queryRow(query, args...).Scan(&n); err != nil {
			return copied, skipped, fmt.Errorf("look up %s: %w", name(r), err)
		}
		if n > 0 {
			skipped++
			continue
		}
		if err := insert(c, r); err != nil {
			return copied, skipped, fmt.Errorf("copy %s: %w", name(r), err)
		}
		copied++
	}
	return copied, skipped, nil
}

// Counts is how much a store holds, for `meshperf store info`.
type Counts struct {
	Runs, Invocations, ControlPlaneRuns int
}

// Count counts the store's runs, invocations (distinct run ids) and
// control-plane runs.
func (s *Store) Count() (Counts, error) {
	var n Counts
	err := s.sql().queryRow(`SELECT COUNT(*), COUNT(DISTINCT run_id), (SELECT COUNT(*) FROM cp_runs) FROM runs`).
		Scan(&n.Runs, &n.Invocations, &n.ControlPlaneRuns)
	if err != nil {
		return n, fmt.Errorf("count runs in %s: %w", s.where, err)
	}
	return n, nil
}
