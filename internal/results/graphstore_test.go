package results

import (
	"math"
	"path/filepath"
	"testing"
	"time"
)

// sampleGraphRun is a run over a three-service graph in both-sidecars
// mode: each pod an app and its sidecar, the control plane and the load
// generator beside them, one service that served nothing (NaN latency),
// and two Acmeair-like transactions.
func sampleGraphRun(runID string, start time.Time) Run {
	r := sampleRun(runID, "graph", start)
	nan := math.NaN()
	r.Processes = []Process{
		{Role: RoleGraphApp, Pod: "a-0", PID: 21, VCPU: 0.05, RSSMB: 20, PSSMB: 18, MaxRSSMB: 21},
		{Role: RoleGraphSidecar, Pod: "a-0", PID: 22, VCPU: 0.1, RSSMB: 30, PSSMB: nan, MaxRSSMB: 31},
		{Role: RoleGraphApp, Pod: "b-0", PID: 23, VCPU: 0.04, RSSMB: 19, PSSMB: 17, MaxRSSMB: 20},
		{Role: RoleGraphSidecar, Pod: "b-0", PID: 24, VCPU: 0.08, RSSMB: 29, PSSMB: 25, MaxRSSMB: 30},
		{Role: RoleControlPlane, PID: 25, VCPU: 0.01, RSSMB: 60, PSSMB: 55, MaxRSSMB: 61},
		{Role: RoleLoadGenerator, PID: 26, VCPU: 0.2, RSSMB: 15, PSSMB: 14, MaxRSSMB: 16},
	}
	r.Graph = &GraphRun{
		Workload: "chain-3", Entrypoint: "a", Pods: 2, Hops: 3, SetupSeconds: 4.25,
		Services: []ServiceFigures{
			{Name: "a", Replicas: 1, Requests: 25000, Errors: 2, Latency: Latency{Min: 0.2, Max: 5, Avg: 0.6, P50: 0.5, P75: 0.6, P90: 0.9, P99: 2.5, P999: 4, P9999: 5}},
			{Name: "b", Replicas: 1, Requests: 25000, Errors: 0, Latency: Latency{Min: 0.1, Max: 3, Avg: 0.3, P50: 0.25, P75: 0.3, P90: 0.5, P99: 1, P999: 2.5, P9999: 3}},
			{Name: "idle", Replicas: 2, Requests: 0, Errors: 0, Latency: Latency{Min: nan, Max: nan, Avg: nan, P50: nan, P75: nan, P90: nan, P99: nan, P999: nan, P9999: nan}},
		},
		Transactions: []TransactionFigures{
			{Name: "Login", Count: 900, Errors: 1, RPS: 30, Latency: Latency{Min: 1, Max: 9, Avg: 2, P50: 1.8, P75: 2.2, P90: 3, P99: 7, P999: 9, P9999: 9}},
			{Name: "QueryFlight", Count: 3000, Errors: 0, RPS: 100, Latency: Latency{Min: 0.5, Max: 6, Avg: 1, P50: 0.9, P75: 1.1, P90: 1.5, P99: 4, P999: 6, P9999: nan}},
		},
	}
	return r
}

func TestStoreGraphRoundTrip(t *testing.T) { forEachDialect(t, testStoreGraphRoundTrip) }

func testStoreGraphRoundTrip(t *testing.T, db string, raw conn) {
	st := openStore(t, db)
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	graph, twoPod := sampleGraphRun("g1", t0), sampleRun("p1", "quick", t0.Add(time.Minute))
	for _, r := range []Run{graph, twoPod} {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || !sameRun(runs[0], graph) || !sameRun(runs[1], twoPod) {
		t.Fatalf("round trip\n got %+v\n and %+v\nwant %+v\n and %+v", runs[0], runs[1], graph, twoPod)
	}
	if runs[1].Graph != nil {
		t.Errorf("a two-pod run read back with a graph: %+v", runs[1].Graph)
	}
	// A process in no pod (a two-pod run's, the control plane, the load
	// generator) has a NULL pod, not "".
	var nulls int
	if err := raw.queryRow(`SELECT COUNT(*) FROM processes WHERE pod IS NULL`).Scan(&nulls); err != nil || nulls != len(twoPod.Processes)+2 {
		t.Errorf("processes with a NULL pod: %d, %v; want %d", nulls, err, len(twoPod.Processes)+2)
	}

	// store copy carries the graph along (into SQLite here; the insert is
	// the one tested above on both databases).
	dst := openStore(t, filepath.Join(t.TempDir(), "copy.db"))
	if _, err := Copy(dst, st); err != nil {
		t.Fatal(err)
	}
	copied, err := dst.Runs(Filter{RunID: "g1"})
	if err != nil || len(copied) != 1 || !sameRun(copied[0], graph) {
		t.Fatalf("copied graph run: %+v, %v", copied, err)
	}
}

// An insert that fails half-way through a graph's rows leaves nothing:
// the run and its graph are one transaction.
func TestStoreGraphAllOrNothing(t *testing.T) { forEachDialect(t, testStoreGraphAllOrNothing) }

func testStoreGraphAllOrNothing(t *testing.T, db string, raw conn) {
	st := openStore(t, db)
	r := sampleGraphRun("g2", time.Now())
	// Two transactions at one position break the primary key.
	r.Graph.Transactions = append(r.Graph.Transactions, r.Graph.Transactions...)
	if _, err := raw.exec(`CREATE UNIQUE INDEX transaction_names ON run_graph_transactions(run_row, name)`); err != nil {
		t.Fatal(err)
	}
	if err := st.Insert(r); err == nil {
		t.Fatal("stored a run whose transactions broke a constraint")
	}
	for _, table := range []string{"runs", "processes", "run_graph", "run_graph_services", "run_graph_transactions"} {
		var n int
		if err := raw.queryRow(`SELECT COUNT(*) FROM ` + table).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s has %d rows (%v) after a failed insert", table, n, err)
		}
	}
}

func TestStoreUpgradeFromSchema6(t *testing.T) { forEachDialect(t, testStoreUpgradeFromSchema6) }

func testStoreUpgradeFromSchema6(t *testing.T, db string, raw conn) {
	// A schema-6 store with one run and its processes: opening it adds
	// the graph tables and the pod column, and the run reads back as a
	// two-pod run whose processes have no pod.
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (6)`}
	for _, m := range migrations[:6] {
		stmts = append(stmts, raw.d.schema(m))
	}
	for _, q := range stmts {
		if _, err := raw.exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	old := sampleRun("old", "quick", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	err := func() error {
		// insertRun of schema 6 wrote processes without a pod: write the
		// run's row and processes as it did.
		row, err := raw.insertID(`INSERT INTO runs (run_id, label, scenario, mode, protocol, repetition, connections,
			requested_qps, actual_qps, duration_ns, payload_bytes, response_bytes, mtls, start_time, start_unix_ns, network,
			p90_ms, corrected, calls, errors, error_percent, failed, failure_reason, fortio_json)
			VALUES ('old', 'old_label', 'quick', 'both-sidecars', 'http', 1, 4, 1000, 1000, 1, 0, 0, 0,
			'2026-01-02T03:04:05Z', 0, 'netns', 0.25, 1, 10, 0, 0, 0, '', '')`)
		if err != nil {
			return err
		}
		for _, p := range old.Processes {
			if _, err := raw.exec(`INSERT INTO processes (run_row, role, pid, vcpu, rss_mb) VALUES (?,?,?,?,?)`,
				row, p.Role, p.PID, p.VCPU, p.RSSMB); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, db)
	if v, _ := st.Version(); v != SchemaVersion {
		t.Fatalf("version %d after the upgrade, want %d", v, SchemaVersion)
	}
	runs, err := st.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Graph != nil || len(runs[0].Processes) != 2 ||
		runs[0].Processes[0].Pod != "" || runs[0].Processes[1].RSSMB != 14 {
		t.Fatalf("after the upgrade: %+v", runs)
	}
	// A graph run goes beside it.
	g := sampleGraphRun("new", time.Now().UTC())
	if err := st.Insert(g); err != nil {
		t.Fatal(err)
	}
	if runs, err = st.Runs(Filter{RunID: "new"}); err != nil || len(runs) != 1 || !sameRun(runs[0], g) {
		t.Fatalf("graph run after the upgrade: %+v, %v", runs, err)
	}
}
