package results

import (
	"database/sql"
	"errors"
	"fmt"
)

// migrationGraph (schema 6 -> 7) adds what a run over a service graph
// records (GraphRun): one run_graph row per such run, its services' and
// transactions' figures in order (position from 0), and the pod each
// process ran in (NULL for a two-pod run's processes, and for every row
// stored before schema 7). SQLite's spelling, as every migration's
// (dialect.go).
const migrationGraph = `CREATE TABLE run_graph (
	run_row       INTEGER NOT NULL PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
	workload      TEXT    NOT NULL,
	entrypoint    TEXT    NOT NULL,
	pods          INTEGER NOT NULL,
	hops          INTEGER NOT NULL,
	setup_seconds REAL
);
CREATE TABLE run_graph_services (
	run_row  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	position INTEGER NOT NULL,
	name     TEXT    NOT NULL,
	replicas INTEGER NOT NULL,
	requests INTEGER NOT NULL,
	errors   INTEGER NOT NULL,
	min_ms REAL, max_ms REAL, avg_ms REAL,
	p50_ms REAL, p75_ms REAL, p90_ms REAL, p99_ms REAL, p999_ms REAL, p9999_ms REAL,
	PRIMARY KEY (run_row, position)
);
CREATE TABLE run_graph_transactions (
	run_row  INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
	position INTEGER NOT NULL,
	name     TEXT    NOT NULL,
	count    INTEGER NOT NULL,
	errors   INTEGER NOT NULL,
	rps      REAL,
	min_ms REAL, max_ms REAL, avg_ms REAL,
	p50_ms REAL, p75_ms REAL, p90_ms REAL, p99_ms REAL, p999_ms REAL, p9999_ms REAL,
	PRIMARY KEY (run_row, position)
);
ALTER TABLE processes ADD COLUMN pod TEXT;`

// latencyColumns are the columns a Latency is stored in, in latencyFields'
// order.
const latencyColumns = `min_ms, max_ms, avg_ms, p50_ms, p75_ms, p90_ms, p99_ms, p999_ms, p9999_ms`

// latencyFields are l's fields in latencyColumns' order.
func latencyFields(l *Latency) []*float64 {
	return []*float64{&l.Min, &l.Max, &l.Avg, &l.P50, &l.P75, &l.P90, &l.P99, &l.P999, &l.P9999}
}

func latencyValues(l Latency) []any {
	var out []any
	for _, v := range latencyFields(&l) {
		out = append(out, nullable(*v))
	}
	return out
}

// insertGraph stores a graph run's figures in its run's transaction;
// nothing for a two-pod run.
func insertGraph(c conn, row int64, g *GraphRun) error {
	if g == nil {
		return nil
	}
	if _, err := c.exec(`INSERT INTO run_graph (run_row, workload, entrypoint, pods, hops, setup_seconds) VALUES (?,?,?,?,?,?)`,
		row, g.Workload, g.Entrypoint, g.Pods, g.Hops, nullable(g.SetupSeconds)); err != nil {
		return fmt.Errorf("graph %s: %w", g.Workload, err)
	}
	for i, sf := range g.Services {
		args := append([]any{row, i, sf.Name, sf.Replicas, sf.Requests, sf.Errors}, latencyValues(sf.Latency)...)
		if _, err := c.exec(`INSERT INTO run_graph_services (run_row, position, name, replicas, requests, errors, `+
			latencyColumns+`) VALUES (`+placeholders(len(args))+`)`, args...); err != nil {
			return fmt.Errorf("service %s: %w", sf.Name, err)
		}
	}
	for i, tf := range g.Transactions {
		args := append([]any{row, i, tf.Name, tf.Count, tf.Errors, nullable(tf.RPS)}, latencyValues(tf.Latency)...)
		if _, err := c.exec(`INSERT INTO run_graph_transactions (run_row, position, name, count, errors, rps, `+
			latencyColumns+`) VALUES (`+placeholders(len(args))+`)`, args...); err != nil {
			return fmt.Errorf("transaction %s: %w", tf.Name, err)
		}
	}
	return nil
}

// graph reads a run's graph figures; nil for a two-pod run.
func (s *Store) graph(row int64) (*GraphRun, error) {
	var g GraphRun
	var setup sql.NullFloat64
	err := s.sql().queryRow(`SELECT workload, entrypoint, pods, hops, setup_seconds FROM run_graph WHERE run_row = ?`, row).
		Scan(&g.Workload, &g.Entrypoint, &g.Pods, &g.Hops, &setup)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read graph: %w", err)
	}
	g.SetupSeconds = fromNull(setup)
	if g.Services, err = s.graphServices(row); err != nil {
		return nil, err
	}
	if g.Transactions, err = s.graphTransactions(row); err != nil {
		return nil, err
	}
	return &g, nil
}

func (s *Store) graphServices(row int64) ([]ServiceFigures, error) {
	rows, err := s.sql().query(`SELECT name, replicas, requests, errors, `+latencyColumns+`
		FROM run_graph_services WHERE run_row = ? ORDER BY position`, row)
	if err != nil {
		return nil, fmt.Errorf("read graph services: %w", err)
	}
	defer rows.Close()
	var out []ServiceFigures
	for rows.Next() {
		var sf ServiceFigures
		var lat [9]sql.NullFloat64
		if err := rows.Scan(append([]any{&sf.Name, &sf.Replicas, &sf.Requests, &sf.Errors}, nullTargets(&lat)...)...); err != nil {
			return nil, fmt.Errorf("read graph services: %w", err)
		}
		sf.Latency = latencyFromNull(lat)
		out = append(out, sf)
	}
	return out, rows.Err()
}

func (s *Store) graphTransactions(row int64) ([]TransactionFigures, error) {
	rows, err := s.sql().query(`SELECT name, count, errors, rps, `+latencyColumns+`
		FROM run_graph_transactions WHERE run_row = ? ORDER BY position`, row)
	if err != nil {
		return nil, fmt.Errorf("read graph transactions: %w", err)
	}
	defer rows.Close()
	var out []TransactionFigures
	for rows.Next() {
		var tf TransactionFigures
		var rps sql.NullFloat64
		var lat [9]sql.NullFloat64
		if err := rows.Scan(append([]any{&tf.Name, &tf.Count, &tf.Errors, &rps}, nullTargets(&lat)...)...); err != nil {
			return nil, fmt.Errorf("read graph transactions: %w", err)
		}
		tf.RPS, tf.Latency = fromNull(rps), latencyFromNull(lat)
		out = append(out, tf)
	}
	return out, rows.Err()
}

func nullTargets(v *[9]sql.NullFloat64) []any {
	out := make([]any, len(v))
	for i := range v {
		out[i] = &v[i]
	}
	return out
}

func latencyFromNull(v [9]sql.NullFloat64) Latency {
	var l Latency
	for i, dst := range latencyFields(&l) {
		*dst = fromNull(v[i])
	}
	return l
}
