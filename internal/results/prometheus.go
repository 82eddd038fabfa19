package results

import (
	"database/sql"
	"fmt"
	"io"
	"math"
	"text/tabwriter"
)

// PromFigures are one proxy's figures over a run's steady window as a
// Prometheus scraping it reads them (`meshperf lab run --prometheus`), the
// way Istio's benchmark reads a container's CPU and memory from
// Prometheus: beside the lab's own /proc figures (Process), so that the two
// ways can be compared. NaN when Prometheus had nothing to compute from
// (e.g. no request rate or percentiles for a TCP run, whose proxies count
// connections, not requests).
type PromFigures struct {
	Role string `json:"role"` // as Process.Role
	// VCPU is rate(process_cpu_seconds_total[window]): CPU seconds per second.
	VCPU float64 `json:"vcpu"`
	// RSSMB and MaxRSSMB are avg_over_time and max_over_time of
	// process_resident_memory_bytes over the window, MiB.
	RSSMB    float64 `json:"rss_mb"`
	MaxRSSMB float64 `json:"max_rss_mb"`
	// RPS is sum(rate(istio_requests_total[window])): the requests the
	// proxy reported per second.
	RPS float64 `json:"rps"`
	// P50, P90 and P99 are histogram_quantile over the rate of
	// istio_request_duration_milliseconds_bucket in the window, ms.
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
}

// migrationPrometheus (schema 5 -> 6) adds the table of a run's
// Prometheus figures, one row per proxy (run_row = runs.id). SQLite's
// spelling, as every migration's (dialect.go).
const migrationPrometheus = `CREATE TABLE run_prometheus (
	run_row    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	role       TEXT    NOT NULL,
	vcpu       REAL,
	rss_mb     REAL,
	max_rss_mb REAL,
	rps        REAL,
	p50_ms     REAL,
	p90_ms     REAL,
	p99_ms     REAL,
	PRIMARY KEY (run_row, role)
);`

// insertPrometheus stores a run's Prometheus figures in its transaction.
func insertPrometheus(c conn, row int64, figs []PromFigures) error {
	for _, f := range figs {
		if _, err := c.exec(`INSERT INTO run_prometheus (run_row, role, vcpu, rss_mb, max_rss_mb, rps, p50_ms, p90_ms, p99_ms)
			VALUES (?,?,?,?,?,?,?,?,?)`, row, f.Role, nullable(f.VCPU), nullable(f.RSSMB), nullable(f.MaxRSSMB),
			nullable(f.RPS), nullable(f.P50), nullable(f.P90), nullable(f.P99)); err != nil {
			return fmt.Errorf("figures from Prometheus of %s: %w", f.Role, err)
		}
	}
	return nil
}

// prometheus reads a run's Prometheus figures, by role.
func (s *Store) prometheus(row int64) ([]PromFigures, error) {
	rows, err := s.sql().query(`SELECT role, vcpu, rss_mb, max_rss_mb, rps, p50_ms, p90_ms, p99_ms
		FROM run_prometheus WHERE run_row = ? ORDER BY role`, row)
	if err != nil {
		return nil, fmt.Errorf("read Prometheus figures: %w", err)
	}
	defer rows.Close()
	var out []PromFigures
	for rows.Next() {
		var f PromFigures
		var v [7]sql.NullFloat64
		if err := rows.Scan(&f.Role, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6]); err != nil {
			return nil, fmt.Errorf("read Prometheus figures: %w", err)
		}
		for i, dst := range []*float64{&f.VCPU, &f.RSSMB, &f.MaxRSSMB, &f.RPS, &f.P50, &f.P90, &f.P99} {
			*dst = fromNull(v[i])
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// PromVsProc pairs a proxy's Prometheus figures with the lab's /proc
// figures of the same process over the same window.
type PromVsProc struct {
	Prom PromFigures
	Proc Process // zero with NaNs when the run has no /proc figures for the role
}

// PromVsProc is the run's Prometheus figures each beside its process's
// /proc figures, in the order of r.Prometheus.
func (r Run) PromVsProc() []PromVsProc {
	var out []PromVsProc
	nan := math.NaN()
	for _, f := range r.Prometheus {
		pair := PromVsProc{Prom: f, Proc: Process{Role: f.Role, VCPU: nan, RSSMB: nan, PSSMB: nan, MaxRSSMB: nan}}
		for _, p := range r.Processes {
			if p.Role == f.Role {
				pair.Proc = p
			}
		}
		out = append(out, pair)
	}
	return out
}

// WritePromVsProc writes, for each run with Prometheus figures, each
// proxy's vCPU and MB from /proc beside Prometheus' and the requests and
// percentiles the proxy reported; nothing when no run has any.
func WritePromVsProc(w io.Writer, runs []Run) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, r := range runs {
		for _, p := range r.PromVsProc() {
			if !header {
				fmt.Fprintln(ew, "\nPrometheus vs /proc, per proxy over each run's steady window:")
				fmt.Fprintf(tw, "run\tproxy\tvCPU /proc\tvCPU prom\tMB /proc\tMB prom\trps prom\tP50 ms\tP90 ms\tP99 ms\t\n")
				header = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Label, p.Prom.Role,
				f3(p.Proc.VCPU), f3(p.Prom.VCPU), f1(p.Proc.RSSMB), f1(p.Prom.RSSMB), f1(p.Prom.RPS),
				f3(p.Prom.P50), f3(p.Prom.P90), f3(p.Prom.P99))
		}
	}
	tw.Flush()
	return ew.err
}
