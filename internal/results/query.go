package results

import (
	"fmt"
	"time"
)

// ScenarioRuns is how much of a scenario the store holds.
type ScenarioRuns struct {
	Scenario    string
	Invocations int // distinct run ids
	Runs        int
	First, Last time.Time // start of the first and the last run
}

// Scenarios lists the scenarios with runs in the store, by name.
func (s *Store) Scenarios() ([]ScenarioRuns, error) {
	rows, err := s.sql().query(`SELECT scenario, COUNT(DISTINCT run_id), COUNT(*), MIN(start_unix_ns), MAX(start_unix_ns)
		FROM runs GROUP BY scenario ORDER BY scenario`)
	if err != nil {
		return nil, fmt.Errorf("list scenarios in %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []ScenarioRuns
	for rows.Next() {
		var sc ScenarioRuns
		var first, last int64
		if err := rows.Scan(&sc.Scenario, &sc.Invocations, &sc.Runs, &first, &last); err != nil {
			return nil, fmt.Errorf("list scenarios in %s: %w", s.where, err)
		}
		sc.First, sc.Last = time.Unix(0, first).UTC(), time.Unix(0, last).UTC()
		out = append(out, sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list scenarios in %s: %w", s.where, err)
	}
	return out, nil
}
