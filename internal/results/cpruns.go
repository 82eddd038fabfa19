package results

import (
	"fmt"
	"strings"
	"time"
)

// migrationControlPlaneRuns (schema 1 -> 2) adds cp_runs: one row per
// control-plane load test (meshperf cpload run, and each step of cpload
// lab). Times are milliseconds (NULL when not measured, e.g. against an
// external control plane without /metrics), sizes bytes, memory MiB;
// report_json is the whole report as cpload writes it with --json.
const migrationControlPlaneRuns = `CREATE TABLE cp_runs (
	id                 INTEGER PRIMARY KEY AUTOINCREMENT,
	label              TEXT    NOT NULL,
	shape              TEXT    NOT NULL,
	start_time         TEXT    NOT NULL,
	start_unix_ns      INTEGER NOT NULL,
	target             TEXT    NOT NULL,
	external           INTEGER NOT NULL,
	delta              INTEGER NOT NULL,
	proxies            INTEGER NOT NULL,
	services           INTEGER NOT NULL,
	sidecar            TEXT    NOT NULL,
	churn              TEXT    NOT NULL,
	changes            INTEGER NOT NULL,
	pushes             REAL,
	convergence_p50_ms REAL, convergence_p90_ms REAL, convergence_p99_ms REAL,
	e2e_p50_ms REAL, e2e_p90_ms REAL, e2e_p99_ms REAL, e2e_max_ms REAL,
	missed             INTEGER NOT NULL,
	all_synced_ms      REAL,
	config_bytes_mean  REAL,
	cpu_seconds        REAL,
	rss_max_mb         REAL,
	report_json        TEXT    NOT NULL
);
CREATE INDEX cp_runs_start ON cp_runs(start_unix_ns);`

// ControlPlaneRun is one row of cp_runs. Pointer fields are NULL when nil.
type ControlPlaneRun struct {
	Label, Shape, Target, Sidecar, Churn string
	Start                                time.Time
	External, Delta                      bool
	Proxies, Services, Changes, Missed   int
	Pushes                               *float64
	ConvergenceP50, ConvergenceP90       *float64
	ConvergenceP99                       *float64
	E2EP50, E2EP90, E2EP99, E2EMax       *float64
	AllSyncedMs, ConfigBytesMean         *float64
	CPUSeconds, RSSMaxMB                 *float64
	ReportJSON                           string
	Provenance                           Provenance
}

// cpRunColumns are cp_runs' columns but id and provenance, in the order
// cpRunValues and cpRunScanTargets use.
const cpRunColumns = `label, shape, start_time, start_unix_ns, target, external, delta, proxies, services,
	sidecar, churn, changes, pushes, convergence_p50_ms, convergence_p90_ms, convergence_p99_ms,
	e2e_p50_ms, e2e_p90_ms, e2e_p99_ms, e2e_max_ms, missed, all_synced_ms, config_bytes_mean, cpu_seconds, rss_max_mb, report_json`

func (r ControlPlaneRun) values() []any {
	return append([]any{
		r.Label, r.Shape, r.Start.UTC().Format(time.RFC3339Nano), r.Start.UnixNano(), r.Target, r.External, r.Delta,
		r.Proxies, r.Services, r.Sidecar, r.Churn, r.Changes, r.Pushes, r.ConvergenceP50, r.ConvergenceP90, r.ConvergenceP99,
		r.E2EP50, r.E2EP90, r.E2EP99, r.E2EMax, r.Missed, r.AllSyncedMs, r.ConfigBytesMean, r.CPUSeconds, r.RSSMaxMB, r.ReportJSON,
	}, r.Provenance.values()...)
}

// InsertControlPlaneRun stores a control-plane load test.
func (s *Store) InsertControlPlaneRun(r ControlPlaneRun) error {
	if err := insertControlPlaneRun(s.sql(), r); err != nil {
		return fmt.Errorf("store control-plane run %q in %s: %w", r.Label, s.where, err)
	}
	return nil
}

func insertControlPlaneRun(c conn, r ControlPlaneRun) error {
	values := r.values()
	_, err := c.exec(`INSERT INTO cp_runs (`+cpRunColumns+`, `+strings.Join(provenanceColumns, ", ")+`) VALUES (`+placeholders(len(values))+`)`, values...)
	return err
}

// ControlPlaneRuns returns the stored control-plane runs, oldest first,
// every column (report_json has the whole report).
func (s *Store) ControlPlaneRuns() ([]ControlPlaneRun, error) {
	rows, err := s.sql().query(`SELECT ` + cpRunColumns + `, ` + strings.Join(provenanceColumns, ", ") + ` FROM cp_runs ORDER BY start_unix_ns, id`)
	if err != nil {
		return nil, fmt.Errorf("read control-plane runs from %s: %w", s.where, err)
	}
	defer rows.Close()
	var out []ControlPlaneRun
	for rows.Next() {
		var r ControlPlaneRun
		var ns int64
		var start, machineKey string
		dst := append([]any{&r.Label, &r.Shape, &start, &ns, &r.Target, &r.External, &r.Delta,
			&r.Proxies, &r.Services, &r.Sidecar, &r.Churn, &r.Changes, &r.Pushes, &r.ConvergenceP50, &r.ConvergenceP90, &r.ConvergenceP99,
			&r.E2EP50, &r.E2EP90, &r.E2EP99, &r.E2EMax, &r.Missed, &r.AllSyncedMs, &r.ConfigBytesMean, &r.CPUSeconds, &r.RSSMaxMB, &r.ReportJSON},
			r.Provenance.scanTargets(&machineKey)...)
		if err := rows.Scan(dst...); err != nil {
			return nil, fmt.Errorf("read control-plane runs from %s: %w", s.where, err)
		}
		r.Start = time.Unix(0, ns).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}
