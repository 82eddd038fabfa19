package results

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// migrationSweeps (schema 7 -> 8) adds the load generator's P99 send
// delay to each run (NULL when unknown: another tool's result, or a run
// stored before schema 8) and the analysis of a capacity sweep beside its
// invocation's runs: one run_sweeps row per sweep, keyed by the
// invocation's run id, the capacity.Analysis as JSON with unknown figures
// (NaN) as null (nanjson.go). The analysis is kept whole rather than in
// columns: it is read whole (reports, the dashboard), never queried into.
const migrationSweeps = `ALTER TABLE runs ADD COLUMN send_delay_p99_ms REAL;
CREATE TABLE run_sweeps (
	run_id          TEXT    NOT NULL PRIMARY KEY,
	scenario        TEXT    NOT NULL,
	created_unix_ns INTEGER NOT NULL,
	analysis        TEXT    NOT NULL
);`

// InsertSweep stores a sweep's analysis under its invocation's run id. An
// invocation has one sweep: a second for the same run id is an error.
func (s *Store) InsertSweep(sw Sweep) error {
	if err := s.inTx(func(c conn) error { return insertSweep(c, sw) }); err != nil {
		return fmt.Errorf("store the sweep of run %s in %s: %w", sw.RunID, s.where, err)
	}
	return nil
}

func insertSweep(c conn, sw Sweep) error {
	if sw.RunID == "" {
		return errors.New("the sweep has no run id")
	}
	analysis, err := MarshalNaN(sw.Analysis)
	if err != nil {
		return fmt.Errorf("encode the analysis: %w", err)
	}
	var n int
	if err := c.queryRow(`SELECT COUNT(*) FROM run_sweeps WHERE run_id = ?`, sw.RunID).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("run %s has a sweep stored already", sw.RunID)
	}
	_, err = c.exec(`INSERT INTO run_sweeps (run_id, scenario, created_unix_ns, analysis) VALUES (?,?,?,?)`,
		sw.RunID, sw.Scenario, time.Now().UnixNano(), string(analysis))
	return err
}

// Sweep reads the sweep stored under an invocation's run id; nil, and no
// error, when the invocation was not a sweep.
func (s *Store) Sweep(runID string) (*Sweep, error) {
	sw := Sweep{RunID: runID}
	var analysis string
	err := s.sql().queryRow(`SELECT scenario, analysis FROM run_sweeps WHERE run_id = ?`, runID).Scan(&sw.Scenario, &analysis)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the sweep of run %s from %s: %w", runID, s.where, err)
	}
	if err := UnmarshalNaN([]byte(analysis), &sw.Analysis); err != nil {
		return nil, fmt.Errorf("read the sweep of run %s from %s: its analysis: %w", runID, s.where, err)
	}
	return &sw, nil
}

// Sweeps reads every stored sweep, oldest first.
func (s *Store) Sweeps() ([]Sweep, error) {
	rows, err := s.sql().query(`SELECT run_id FROM run_sweeps ORDER BY created_unix_ns, run_id`)
	if err != nil {
		return nil, fmt.Errorf("read sweeps from %s: %w", s.where, err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read sweeps from %s: %w", s.where, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sweeps from %s: %w", s.where, err)
	}
	var out []Sweep
	for _, id := range ids {
		sw, err := s.Sweep(id)
		if err != nil {
			return nil, err
		}
		out = append(out, *sw)
	}
	return out, nil
}
