package results

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// SchemaVersion is the store layout this package writes. Open upgrades an
// older database step by step and refuses a newer one.
const SchemaVersion = 9

// migrations[i] takes a database from version i to i+1, on SQLite and on
// PostgreSQL alike: each is written in SQLite's spelling, which the
// dialect rewrites (dialect.go), so a new version is one more entry. The
// schema, for readers such as the dashboard:
//
//   - schema_version(version): one row, the layout's version.
//   - runs: one row per load run. Latencies are milliseconds (NULL when
//     unknown, e.g. a failed run), duration_ns nanoseconds, start_time
//     RFC 3339 UTC with start_unix_ns beside it for range queries,
//     requested_qps 0 for "as fast as possible", booleans 0/1, network
//     "netns" or "loopback", fortio_json the path of the load generator's
//     result. id is the row id; run_id groups the runs of one invocation.
//   - processes: the per-process figures of a run (run_row = runs.id):
//     role client-sidecar | server-sidecar | client-app | server-app, vcpu
//     (CPU seconds per second), rss_mb / pss_mb (averages) and max_rss_mb, MiB.
//   - cp_runs: control-plane load tests (cpruns.go).
//   - run_percentiles: a run's latency spectrum (run_row = runs.id): ms at
//     each of SpectrumPercentiles (percentile 0-100). Runs stored before
//     schema 3 have none.
//   - provenance columns on runs and cp_runs (provenance.go): what was
//     measured and where; machine_key is Machine.Key(). Rows stored before
//     schema 4 have empty strings and zeros there.
//   - run_histogram: a run's latency histogram (run_row = runs.id): bucket
//     (from 0, in order) holds count calls from start_ms to end_ms. Runs
//     stored before schema 5 have none.
//   - run_prometheus: a lab run's per-proxy figures read from Prometheus
//     (run_row = runs.id; prometheus.go): vcpu, rss_mb, max_rss_mb, rps,
//     p50_ms, p90_ms, p99_ms, NULL when unknown. Only runs made with
//     --prometheus have rows, from schema 6 on.
//   - run_graph, run_graph_services, run_graph_transactions: what a run
//     over a service graph adds (graph.go, graphstore.go): one run_graph
//     row (workload, entrypoint, pods, hops, setup_seconds), each
//     service's requests, errors and latency (ms) and, for Acmeair, each
//     transaction's; processes.pod names the pod a graph's process ran
//     in, NULL otherwise. From schema 7 on.
//   - runs.send_delay_p99_ms: the load generator's P99 lateness in
//     sending (Run.SendDelayP99), NULL when unknown; run_sweeps: a
//     capacity sweep's analysis (sweepstore.go), one row per sweeping
//     invocation (run_id = runs.run_id), the capacity.Analysis as JSON
//     with unknown figures as null. From schema 8 on.
//   - processes.user_vcpu, system_vcpu and the per-request counters
//     (syscalls, voluntary and involuntary context switches, allocations;
//     counters.go), NULL when not measured. From schema 9 on.
var migrations = []string{
	`CREATE TABLE runs (
		id             INTEGER PRIMARY KEY AUTOINCREMENT,
		run_id         TEXT    NOT NULL,
		label          TEXT    NOT NULL,
		scenario       TEXT    NOT NULL,
		mode           TEXT    NOT NULL,
		protocol       TEXT    NOT NULL,
		repetition     INTEGER NOT NULL,
		connections    INTEGER NOT NULL,
		requested_qps  INTEGER NOT NULL,
		actual_qps     REAL    NOT NULL,
		duration_ns    INTEGER NOT NULL,
		payload_bytes  INTEGER NOT NULL,
		response_bytes REAL    NOT NULL,
		mtls           INTEGER NOT NULL,
		start_time     TEXT    NOT NULL,
		start_unix_ns  INTEGER NOT NULL,
		network        TEXT    NOT NULL,
		min_ms REAL, max_ms REAL, avg_ms REAL,
		p50_ms REAL, p75_ms REAL, p90_ms REAL, p99_ms REAL, p999_ms REAL, p9999_ms REAL,
		corrected      INTEGER NOT NULL,
		calls          INTEGER NOT NULL,
		errors         INTEGER NOT NULL,
		error_percent  REAL    NOT NULL,
		failed         INTEGER NOT NULL,
		failure_reason TEXT    NOT NULL,
		fortio_json    TEXT    NOT NULL
	);
	CREATE INDEX runs_run_id ON runs(run_id);
	CREATE INDEX runs_scenario_start ON runs(scenario, start_unix_ns);
	CREATE INDEX runs_start ON runs(start_unix_ns);
	CREATE TABLE processes (
		run_row    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		role       TEXT    NOT NULL,
		pid        INTEGER NOT NULL,
		vcpu       REAL,
		rss_mb     REAL,
		pss_mb     REAL,
		max_rss_mb REAL
	);
	CREATE INDEX processes_run_row ON processes(run_row);`,
	migrationControlPlaneRuns, // cpruns.go
	`CREATE TABLE run_percentiles (
		run_row    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
		percentile REAL    NOT NULL,
		ms         REAL    NOT NULL,
		PRIMARY KEY (run_row, percentile)
	);`,
	migrationProvenance, // provenance.go
	migrationHistograms, // histogram.go
	migrationPrometheus, // prometheus.go
	migrationGraph,      // graphstore.go
	migrationSweeps,     // sweepstore.go
	migrationCounters,   // counters.go
}

// Store is the results database.
type Store struct {
	db *sql.DB
	d  dialect
	// where names the store in messages (a path, or a URL without its
	// password).
	where string
}

// connectTimeout bounds reaching a PostgreSQL server whose URL does not
// say (connect_timeout=): an address that drops packets must not hang
// the command.
const connectTimeout = 10 * time.Second

// Open opens the results store db names (ParseLocation: a SQLite path,
// created if needed, or a PostgreSQL URL) and brings its schema up to
// SchemaVersion. A db that names no database is an ErrBadLocation.
func Open(db string) (*Store, error) {
	loc, err := ParseLocation(db)
	if err != nil {
		return nil, err
	}
	s := &Store{where: loc.String()}
	if loc.IsFile() {
		dsn := "file:" + (&url.URL{Path: loc.File}).EscapedPath() +
			"?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)"
		if s.db, err = sql.Open("sqlite", dsn); err != nil {
			return nil, fmt.Errorf("open results database %s: %w", s.where, err)
		}
		s.d = sqlite{}
	} else {
		cfg := loc.pgConfig.Copy()
		if cfg.ConnectTimeout == 0 {
			cfg.ConnectTimeout = connectTimeout
		}
		s.db, s.d = stdlib.OpenDB(*cfg), postgres{}
	}
	if err := s.migrate(context.Background()); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("open results database %s: %w", s.where, oneLine{err})
	}
	return s, nil
}

// oneLine is an error on one line: pgx lists the addresses it tried on
// lines of their own, and a command's error is one line.
type oneLine struct{ err error }

func (e oneLine) Error() string { return strings.Join(strings.Fields(e.err.Error()), " ") }
func (e oneLine) Unwrap() error { return e.err }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Dialect names the database the store runs on: sqlite or postgres.
func (s *Store) Dialect() string { return s.d.Name() }

// String names the store for messages (a PostgreSQL URL without its
// password).
func (s *Store) String() string { return s.where }

// sql runs the store's SQL on its database, outside a transaction.
func (s *Store) sql() conn { return conn{s.d, s.db} }

// Version reads the database's schema version.
func (s *Store) Version() (int, error) {
	var v int
	err := s.sql().queryRow(`SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.d.lockSchema(ctx, tx); err != nil {
		return err
	}
	c := conn{s.d, tx}
	var tables int
	if err := c.queryRow(s.d.tableExists(), "schema_version").Scan(&tables); err != nil {
		return err
	}
	if tables == 0 {
		if _, err := c.exec(s.d.schema(`CREATE TABLE schema_version (version INTEGER NOT NULL)`)); err != nil {
			return err
		}
	}
	var v int
	switch err := c.queryRow(`SELECT version FROM schema_version`).Scan(&v); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := c.exec(`INSERT INTO schema_version(version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return fmt.Errorf("not a meshperf results database? %w", err)
	}
	if v > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this meshperf understands (%d); use a newer meshperf or another -db", v, SchemaVersion)
	}
	for ; v < SchemaVersion; v++ {
		if _, err := c.exec(s.d.schema(migrations[v])); err != nil {
			return fmt.Errorf("migrate schema %d to %d: %w", v, v+1, err)
		}
	}
	if _, err := c.exec(`UPDATE schema_version SET version = ?`, v); err != nil {
		return err
	}
	return tx.Commit()
}

// inTx runs f in one transaction: all of it is stored, or none.
func (s *Store) inTx(f func(c conn) error) error {
	tx, err := s.db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(conn{s.d, tx}); err != nil {
		return err
	}
	return tx.Commit()
}

// Insert stores a run with its processes, percentiles, histogram,
// Prometheus and graph figures in one transaction.
func (s *Store) Insert(r Run) error {
	if err := s.inTx(func(c conn) error { return insertRun(c, r) }); err != nil {
		return fmt.Errorf("store run %s in %s: %w", r.Label, s.where, err)
	}
	return nil
}

func insertRun(c conn, r Run) error {
	l := r.Latency
	cols := `run_id, label, scenario, mode, protocol, repetition,
		connections, requested_qps, actual_qps, duration_ns, payload_bytes, response_bytes, mtls,
		start_time, start_unix_ns, network, min_ms, max_ms, avg_ms, p50_ms, p75_ms, p90_ms, p99_ms,
		p999_ms, p9999_ms, corrected, calls, errors, error_percent, failed, failure_reason, fortio_json, send_delay_p99_ms, ` +
		strings.Join(provenanceColumns, ", ")
	values := append([]any{
		r.RunID, r.Label, r.Scenario, r.Mode, r.Protocol, r.Repetition,
		r.Connections, r.RequestedQPS, OrZero(r.ActualQPS), int64(r.Duration), r.PayloadSize, OrZero(r.ResponseSize), r.MTLS,
		r.StartTime.UTC().Format(time.RFC3339Nano), r.StartTime.UnixNano(), r.Network,
		nullable(l.Min), nullable(l.Max), nullable(l.Avg), nullable(l.P50), nullable(l.P75), nullable(l.P90),
		nullable(l.P99), nullable(l.P999), nullable(l.P9999),
		r.Corrected, r.Calls, r.Errors, OrZero(r.ErrorPercent), r.Failed, r.FailureReason, r.FortioJSON,
		nullable(r.SendDelayP99),
	}, r.Provenance.values()...)
	row, err := c.insertID(`INSERT INTO runs (`+cols+`) VALUES (`+placeholders(len(values))+`)`, values...)
	if err != nil {
		return err
	}
	for _, p := range r.Processes {
		values := append([]any{row, p.Role, nullableText(p.Pod), p.PID, nullable(p.VCPU), nullable(p.RSSMB),
			nullable(p.PSSMB), nullable(p.MaxRSSMB)}, counterValues(p.Counters)...)
		if _, err := c.exec(`INSERT INTO processes (run_row, role, pod, pid, vcpu, rss_mb, pss_mb, max_rss_mb, `+counterColumns+`)
			VALUES (`+placeholders(len(values))+`)`, values...); err != nil {
			return fmt.Errorf("process %s: %w", p.Role, err)
		}
	}
	for i, b := range r.Histogram {
		if _, err := c.exec(`INSERT INTO run_histogram (run_row, bucket, start_ms, end_ms, count) VALUES (?,?,?,?,?)`,
			row, i, b.StartMs, b.EndMs, b.Count); err != nil {
			return fmt.Errorf("histogram bucket %d: %w", i, err)
		}
	}
	for _, pv := range r.Spectrum {
		if _, err := c.exec(`INSERT INTO run_percentiles (run_row, percentile, ms) VALUES (?,?,?)`,
			row, pv.Percentile, pv.Ms); err != nil {
			return fmt.Errorf("percentile %v: %w", pv.Percentile, err)
		}
	}
	if err := insertPrometheus(c, row, r.Prometheus); err != nil {
		return err
	}
	return insertGraph(c, row, r.Graph)
}

// Filter selects runs; zero fields match everything. From is inclusive, To
// exclusive, on the run's start time.
type Filter struct {
	RunID    string
	Scenario string
	From, To time.Time
	// Labels matches the provenance's labels exactly; MachineKey the
	// provenance's Machine.Key().
	Labels     string
	MachineKey string
}

// Runs returns the matching runs in start order.
func (s *Store) Runs(f Filter) ([]Run, error) {
	var where []string
	var args []any
	add := func(cond string, v any) { where = append(where, cond); args = append(args, v) }
	if f.RunID != "" {
		add("run_id = ?", f.RunID)
	}
	if f.Scenario != "" {
		add("scenario = ?", f.Scenario)
	}
	if f.Labels != "" {
		add("labels = ?", f.Labels)
	}
	if f.MachineKey != "" {
		add("machine_key = ?", f.MachineKey)
	}
	if !f.From.IsZero() {
		add("start_unix_ns >= ?", f.From.UnixNano())
	}
	if !f.To.IsZero() {
		add("start_unix_ns < ?", f.To.UnixNano())
	}
	return s.runsWhere(strings.Join(where, " AND "), args...)
}

// runsWhere returns the runs matching an SQL condition on runs' columns
// ("" for all), with their processes, spectra, Prometheus and graph figures, in
// start order.
func (s *Store) runsWhere(cond string, args ...any) ([]Run, error) {
	q := `SELECT id, run_id, label, scenario, mode, protocol, repetition, connections, requested_qps,
		actual_qps, duration_ns, payload_bytes, response_bytes, mtls, start_time, network, min_ms, max_ms,
		avg_ms, p50_ms, p75_ms, p90_ms, p99_ms, p999_ms, p9999_ms, corrected, calls, errors,
		error_percent, failed, failure_reason, fortio_json, send_delay_p99_ms, ` + strings.Join(provenanceColumns, ", ") + ` FROM runs`
	if cond != "" {
		q += " WHERE " + cond
	}
	q += " ORDER BY start_unix_ns, id"
	rows, err := s.sql().query(q, args...)
	if err != nil {
		return nil, fmt.Errorf("read runs from %s: %w", s.where, err)
	}
	defer rows.Close()
	var runs []Run
	var ids []int64
	for rows.Next() {
		r, id, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("read runs: %w", err)
		}
		runs, ids = append(runs, r), append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read runs: %w", err)
	}
	rows.Close()
	for i := range runs {
		if runs[i].Processes, err = s.processes(ids[i]); err != nil {
			return nil, err
		}
		if runs[i].Spectrum, err = s.spectrum(ids[i]); err != nil {
			return nil, err
		}
		if runs[i].Histogram, err = s.histogram(ids[i]); err != nil {
			return nil, err
		}
		if runs[i].Prometheus, err = s.prometheus(ids[i]); err != nil {
			return nil, err
		}
		if runs[i].Graph, err = s.graph(ids[i]); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

func scanRun(rows *sql.Rows) (Run, int64, error) {
	var r Run
	var id, durNS int64
	var start string
	var lat [9]sql.NullFloat64
	var sendDelay sql.NullFloat64
	var machineKey string
	dst := append([]any{&id, &r.RunID, &r.Label, &r.Scenario, &r.Mode, &r.Protocol, &r.Repetition,
		&r.Connections, &r.RequestedQPS, &r.ActualQPS, &durNS, &r.PayloadSize, &r.ResponseSize, &r.MTLS,
		&start, &r.Network, &lat[0], &lat[1], &lat[2], &lat[3], &lat[4], &lat[5], &lat[6], &lat[7], &lat[8],
		&r.Corrected, &r.Calls, &r.Errors, &r.ErrorPercent, &r.Failed, &r.FailureReason, &r.FortioJSON, &sendDelay},
		r.Provenance.scanTargets(&machineKey)...)
	err := rows.Scan(dst...)
	if err != nil {
		return r, 0, err
	}
	r.Duration = time.Duration(durNS)
	if r.StartTime, err = time.Parse(time.RFC3339Nano, start); err != nil {
		return r, 0, fmt.Errorf("run %d start time %q: %w", id, start, err)
	}
	r.Latency = latencyFromNull(lat)
	r.SendDelayP99 = fromNull(sendDelay)
	return r, id, nil
}

func (s *Store) processes(row int64) ([]Process, error) {
	rows, err := s.sql().query(`SELECT role, pod, pid, vcpu, rss_mb, pss_mb, max_rss_mb, `+counterColumns+` FROM processes
		WHERE run_row = ? ORDER BY `+s.d.insertionOrder(), row)
	if err != nil {
		return nil, fmt.Errorf("read processes: %w", err)
	}
	defer rows.Close()
	var out []Process
	for rows.Next() {
		var p Process
		var v [4]sql.NullFloat64
		var c [6]sql.NullFloat64
		var pod sql.NullString
		if err := rows.Scan(&p.Role, &pod, &p.PID, &v[0], &v[1], &v[2], &v[3], &c[0], &c[1], &c[2], &c[3], &c[4], &c[5]); err != nil {
			return nil, fmt.Errorf("read processes: %w", err)
		}
		p.Pod = pod.String
		p.VCPU, p.RSSMB, p.PSSMB, p.MaxRSSMB = fromNull(v[0]), fromNull(v[1]), fromNull(v[2]), fromNull(v[3])
		p.Counters = countersFromNull(c)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *Store) spectrum(row int64) ([]PercentileValue, error) {
	rows, err := s.sql().query(`SELECT percentile, ms FROM run_percentiles WHERE run_row = ? ORDER BY percentile`, row)
	if err != nil {
		return nil, fmt.Errorf("read percentiles: %w", err)
	}
	defer rows.Close()
	var out []PercentileValue
	for rows.Next() {
		var pv PercentileValue
		if err := rows.Scan(&pv.Percentile, &pv.Ms); err != nil {
			return nil, fmt.Errorf("read percentiles: %w", err)
		}
		out = append(out, pv)
	}
	return out, rows.Err()
}

func (s *Store) histogram(row int64) ([]HistogramBucket, error) {
	rows, err := s.sql().query(`SELECT start_ms, end_ms, count FROM run_histogram WHERE run_row = ? ORDER BY bucket`, row)
	if err != nil {
		return nil, fmt.Errorf("read histogram: %w", err)
	}
	defer rows.Close()
	var out []HistogramBucket
	for rows.Next() {
		var b HistogramBucket
		if err := rows.Scan(&b.StartMs, &b.EndMs, &b.Count); err != nil {
			return nil, fmt.Errorf("read histogram: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// nullable stores NaN (unknown) as NULL.
func nullable(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

// nullableText stores "" (none) as NULL.
func nullableText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// OrZero is v, or 0 when v is not a number a store or a JSON document can
// carry (NaN, an infinity): for fields where 0 reads as "not measured".
func OrZero(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

func fromNull(v sql.NullFloat64) float64 {
	if !v.Valid {
		return math.NaN()
	}
	return v.Float64
}
