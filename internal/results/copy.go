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
}

// Copy copies every run (with its processes, percentiles and provenance)
// and every control-plane run of src into dst, in one transaction on dst:
// all of it lands, or none. It can be run again: a run dst already holds
// is skipped, a run being the same invocation, label and start time
// (run_id, label, start_unix_ns), a control-plane run the same label,
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
	err = dst.inTx(func(c conn) error {
		for _, r := range runs {
			var held int
			if err := c.queryRow(`SELECT COUNT(*) FROM runs WHERE run_id = ? AND label = ? AND start_unix_ns = ?`,
				r.RunID, r.Label, r.StartTime.UnixNano()).Scan(&held); err != nil {
				return fmt.Errorf("look up run %s: %w", r.Label, err)
			}
			if held > 0 {
				n.RunsSkipped++
				continue
			}
			if err := insertRun(c, r); err != nil {
				return fmt.Errorf("copy run %s (%s): %w", r.Label, r.StartTime.Format(time.RFC3339), err)
			}
			n.Runs++
		}
		for _, r := range cpRuns {
			var held int
			if err := c.queryRow(`SELECT COUNT(*) FROM cp_runs WHERE label = ? AND shape = ? AND start_unix_ns = ?`,
				r.Label, r.Shape, r.Start.UnixNano()).Scan(&held); err != nil {
				return fmt.Errorf("look up control-plane run %s: %w", r.Label, err)
			}
			if held > 0 {
				n.ControlPlaneRunsSkipped++
				continue
			}
			if err := insertControlPlaneRun(c, r); err != nil {
				return fmt.Errorf("copy control-plane run %s (%s): %w", r.Label, r.Start.Format(time.RFC3339), err)
			}
			n.ControlPlaneRuns++
		}
		return nil
	})
	if err != nil {
		return Copied{}, fmt.Errorf("copy %s to %s: %w", src.where, dst.where, err)
	}
	return n, nil
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
