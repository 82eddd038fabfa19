package results

import (
	"database/sql"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// storeDialects are the databases the store's tests run on: each test
// that is about the store, not about files, runs on both through
// forEachDialect. newDB returns a -db for an empty store of the dialect.
var storeDialects = []struct {
	name   string
	d      dialect
	driver string
	newDB  func(t testing.TB) string
}{
	{"sqlite", sqlite{}, "sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "meshperf.db") }},
	{"postgres", postgres{}, "pgx", pgtest.NewDatabase},
}

// forEachDialect runs test as a subtest per dialect, with a fresh -db and
// a raw connection to it (not migrated) in that dialect's spelling.
func forEachDialect(t *testing.T, test func(t *testing.T, db string, raw conn)) {
	for _, sd := range storeDialects {
		t.Run(sd.name, func(t *testing.T) {
			db := sd.newDB(t)
			dsn := db
			if sd.name == "sqlite" {
				dsn = "file:" + db + "?_pragma=busy_timeout(5000)"
			}
			rawDB, err := sql.Open(sd.driver, dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rawDB.Close() })
			test(t, db, conn{sd.d, rawDB})
		})
	}
}

// openStore opens db and closes it when t ends.
func openStore(t testing.TB, db string) *Store {
	t.Helper()
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func sampleRun(runID, scenario string, start time.Time) Run {
	return Run{
		RunID: runID, Label: runID + "_qps_1000_c_4_1024_both", Scenario: scenario, Mode: "both-sidecars",
		Protocol: "http", Repetition: 2, Connections: 4, RequestedQPS: 1000, ActualQPS: 999.5,
		Duration: 25 * time.Second, PayloadSize: 1024, ResponseSize: 1142, MTLS: true,
		StartTime: start, Network: "loopback", Corrected: true, Calls: 25000, Errors: 3, ErrorPercent: 0.012,
		Latency:      Latency{Min: 0.1, Max: 4, Avg: 0.4, P50: 0.3, P75: 0.4, P90: 0.5, P99: 1, P999: 2, P9999: math.NaN()},
		SendDelayP99: 0.42,
		Processes: []Process{
			{Role: RoleClientSidecar, PID: 11, VCPU: 0.1, RSSMB: 12, PSSMB: 10, MaxRSSMB: 13},
			{Role: RoleServerSidecar, PID: 12, VCPU: 0.2, RSSMB: 14, PSSMB: math.NaN(), MaxRSSMB: 15,
				Counters: &ProcessCounters{UserVCPU: 0.08, SystemVCPU: 0.12, SyscallsPerRequest: 4.5,
					VoluntarySwitchesPerRequest: 0.9, InvoluntarySwitchesPerRequest: 0.01, AllocationsPerRequest: math.NaN()}},
		},
		Spectrum:   []PercentileValue{{50, 0.3}, {90, 0.5}, {99.99, 3.5}},
		Histogram:  []HistogramBucket{{StartMs: 0.1, EndMs: 0.2, Count: 9000}, {StartMs: 0.2, EndMs: 0.5, Count: 15990}, {StartMs: 0.5, EndMs: 4, Count: 10}, {StartMs: 4, EndMs: 4, Count: 0}, {StartMs: 4, EndMs: 4, Count: 0}},
		FortioJSON: "/tmp/x.json",
		Provenance: sampleProvenance(),
	}
}

func sampleProvenance() Provenance {
	return Provenance{
		Meshperf:     Build{Version: "dev-83dc9c3aa1b2", Commit: "83dc9c3aa1b2c3d4e5f60718293a4b5c6d7e8f90", Modified: true},
		DataPlane:    Component{Name: "meshperf-proxy", Version: "0.1.0", Commit: "83dc9c3aa1b2"},
		ControlPlane: Component{Name: "meshperf-pilot", Version: "dev-83dc9c3aa1b2"},
		ParamsHash:   "0123456789abcdef",
		Labels:       "nightly",
		Machine:      Machine{Hostname: "ci-1", CPUs: 2, CPUModel: "Intel(R) Xeon(R) Processor", MemoryMB: 24000, Kernel: "Linux 6.18"},
	}
}

// sameRun compares runs treating NaN as equal to NaN.
func sameRun(a, b Run) bool {
	nanless := func(r Run) Run {
		fix := func(v *float64) {
			if math.IsNaN(*v) {
				*v = -12345
			}
		}
		fix(&r.SendDelayP99)
		l := &r.Latency
		for _, v := range []*float64{&l.Min, &l.Max, &l.Avg, &l.P50, &l.P75, &l.P90, &l.P99, &l.P999, &l.P9999} {
			fix(v)
		}
		ps := append([]Process(nil), r.Processes...)
		for i := range ps {
			fix(&ps[i].VCPU)
			fix(&ps[i].PSSMB)
			if c := ps[i].Counters; c != nil {
				cc := *c
				for _, v := range []*float64{&cc.UserVCPU, &cc.SystemVCPU, &cc.SyscallsPerRequest, &cc.VoluntarySwitchesPerRequest,
					&cc.InvoluntarySwitchesPerRequest, &cc.AllocationsPerRequest} {
					fix(v)
				}
				ps[i].Counters = &cc
			}
		}
		r.Processes = ps
		if r.Graph != nil {
			g := *r.Graph
			g.Services = append([]ServiceFigures(nil), g.Services...)
			g.Transactions = append([]TransactionFigures(nil), g.Transactions...)
			for i := range g.Services {
				for _, v := range latencyFields(&g.Services[i].Latency) {
					fix(v)
				}
			}
			for i := range g.Transactions {
				for _, v := range latencyFields(&g.Transactions[i].Latency) {
					fix(v)
				}
			}
			r.Graph = &g
		}
		return r
	}
	a, b = nanless(a), nanless(b)
	return a.StartTime.Equal(b.StartTime) && func() bool { a.StartTime, b.StartTime = time.Time{}, time.Time{}; return reflect.DeepEqual(a, b) }()
}

func TestStoreFileAtThePathAskedFor(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir with space", "results.db")
	if _, err := Open(path); err == nil {
		t.Fatal("opened a database in a directory that does not exist")
	}
	for _, db := range []string{"results db.sqlite", "sqlite:explicit.db"} {
		dir := t.TempDir()
		st, err := Open(filepath.Join(dir, db))
		if strings.HasPrefix(db, "sqlite:") {
			st, err = Open("sqlite:" + filepath.Join(dir, strings.TrimPrefix(db, "sqlite:")))
			db = strings.TrimPrefix(db, "sqlite:")
		}
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		if _, err := os.Stat(filepath.Join(dir, db)); err != nil {
			t.Fatalf("database not at the path asked for: %v", err)
		}
	}
}

func TestStoreRoundTrip(t *testing.T) { forEachDialect(t, testStoreRoundTrip) }

func testStoreRoundTrip(t *testing.T, db string, _ conn) {
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 123456789, time.UTC)
	a := sampleRun("aa", "quick", t0)
	b := sampleRun("bb", "latency", t0.Add(time.Hour))
	b.Failed, b.FailureReason, b.Processes = true, "proxy died: signal: killed", nil
	b.Provenance.Labels, b.Provenance.Machine.CPUs = "candidate", 4
	for _, r := range []Run{a, b} {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	all, err := st.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || !sameRun(all[0], a) || !sameRun(all[1], b) {
		t.Fatalf("round trip\n got %+v\nwant %+v\n and %+v", all, a, b)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopening keeps the data and the version.
	st, err = Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, err := st.Version(); err != nil || v != SchemaVersion {
		t.Errorf("version %d, %v", v, err)
	}
	for _, c := range []struct {
		f    Filter
		want []string
	}{
		{Filter{RunID: "bb"}, []string{"bb"}},
		{Filter{Scenario: "quick"}, []string{"aa"}},
		{Filter{From: t0.Add(time.Minute)}, []string{"bb"}},
		{Filter{To: t0.Add(time.Minute)}, []string{"aa"}},
		{Filter{From: t0, To: t0.Add(2 * time.Hour)}, []string{"aa", "bb"}},
		{Filter{Scenario: "none"}, nil},
		{Filter{Labels: "candidate"}, []string{"bb"}},
		{Filter{MachineKey: a.Provenance.Machine.Key()}, []string{"aa"}},
		{Filter{Labels: "nightly", MachineKey: b.Provenance.Machine.Key()}, nil},
	} {
		got, err := st.Runs(c.f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.RunID)
		}
		if !reflect.DeepEqual(ids, c.want) {
			t.Errorf("Runs(%+v) = %v, want %v", c.f, ids, c.want)
		}
	}
}

func TestStoreRefusesNewerSchema(t *testing.T) { forEachDialect(t, testStoreRefusesNewerSchema) }

func testStoreRefusesNewerSchema(t *testing.T, db string, raw conn) {
	st, err := Open(db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := raw.exec(`UPDATE schema_version SET version = ?`, SchemaVersion+1); err != nil {
		t.Fatal(err)
	}
	_, err = Open(db)
	if err == nil || !strings.Contains(err.Error(), "newer than this meshperf understands") {
		t.Errorf("Open(newer) = %v", err)
	}
	// Refused, not touched: the version stays the newer one.
	var v int
	if err := raw.queryRow(`SELECT version FROM schema_version`).Scan(&v); err != nil || v != SchemaVersion+1 {
		t.Errorf("version after the refusal %d, %v; want %d", v, err, SchemaVersion+1)
	}
}

func TestStoreMigratesFromEmptyVersionTable(t *testing.T) {
	forEachDialect(t, testStoreMigratesFromEmptyVersionTable)
}

func testStoreMigratesFromEmptyVersionTable(t *testing.T, db string, raw conn) {
	// A database created by something that only made the version table (a
	// crash between steps) is brought up to date, not rejected.
	if _, err := raw.exec(raw.d.schema(`CREATE TABLE schema_version (version INTEGER NOT NULL)`)); err != nil {
		t.Fatal(err)
	}
	st := openStore(t, db)
	if err := st.Insert(sampleRun("cc", "quick", time.Now())); err != nil {
		t.Fatal(err)
	}
}

// Two meshperfs opening one fresh database at once: one migrates, the
// other finds it migrated; neither fails and the version table has one row.
func TestStoreConcurrentFirstOpen(t *testing.T) { forEachDialect(t, testStoreConcurrentFirstOpen) }

func testStoreConcurrentFirstOpen(t *testing.T, db string, raw conn) {
	const openers = 4
	errs := make(chan error, openers)
	var wg sync.WaitGroup
	for range openers {
		wg.Go(func() {
			st, err := Open(db)
			if err == nil {
				err = st.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var rows, v int
	if err := raw.queryRow(`SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&rows, &v); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || v != SchemaVersion {
		t.Errorf("schema_version has %d rows, version %d; want 1 row, %d", rows, v, SchemaVersion)
	}
}

func TestStoreMigrationKeepsOlderRows(t *testing.T) {
	forEachDialect(t, testStoreMigrationKeepsOlderRows)
}

func testStoreMigrationKeepsOlderRows(t *testing.T, db string, raw conn) {
	// A schema-3 database (before provenance) with one run: opening it adds
	// the provenance columns and keeps the run, with empty provenance.
	schemaAt(t, raw, 3, oldRun)
	st := openStore(t, db)
	if v, _ := st.Version(); v != SchemaVersion {
		t.Fatalf("version %d after migration, want %d", v, SchemaVersion)
	}
	runs, err := st.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].RunID != "old" || runs[0].Latency.P90 != 0.25 || runs[0].Provenance != (Provenance{}) {
		t.Fatalf("after migration: %+v", runs)
	}
	// New rows go beside it with their provenance.
	if err := st.Insert(sampleRun("new", "quick", time.Now())); err != nil {
		t.Fatal(err)
	}
	if runs, err = st.Runs(Filter{Labels: "nightly"}); err != nil || len(runs) != 1 || runs[0].Provenance != sampleProvenance() {
		t.Fatalf("new run after migration: %+v, %v", runs, err)
	}
}

// oldRun is a run as every schema from the first on could store it.
const oldRun = `INSERT INTO runs (run_id, label, scenario, mode, protocol, repetition, connections,
	requested_qps, actual_qps, duration_ns, payload_bytes, response_bytes, mtls, start_time, start_unix_ns, network,
	p90_ms, corrected, calls, errors, error_percent, failed, failure_reason, fortio_json)
	VALUES ('old', 'old_qps_1000', 'quick', 'no-mesh', 'http', 1, 4, 1000, 1000, 1, 0, 0, 0,
	'2026-01-02T03:04:05Z', 0, 'netns', 0.25, 1, 10, 0, 0, 0, '', '')`

// schemaAt makes raw's database a store at an older schema version, as a
// meshperf of that version left it, then runs extra statements in it (rows
// of that version).
func schemaAt(t *testing.T, raw conn, version int, extra ...string) {
	t.Helper()
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (` + strconv.Itoa(version) + `)`}
	for _, m := range migrations[:version] {
		stmts = append(stmts, raw.d.schema(m))
	}
	for _, q := range append(stmts, extra...) {
		if _, err := raw.exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestMachineKey(t *testing.T) {
	a := Machine{Hostname: "a", CPUs: 2, CPUModel: "EPYC", MemoryMB: 24 * 1024, Kernel: "Linux 6.1"}
	b := a
	b.Hostname, b.Kernel, b.MemoryMB = "b", "Linux 6.18", 24*1024-100 // same class, rounded memory
	c := a
	c.CPUs = 4
	if !a.SameAs(b) || a.SameAs(c) || (Machine{}).SameAs(Machine{}) {
		t.Errorf("SameAs: a~b %v (want true), a~c %v (want false), unknown~unknown %v (want false)",
			a.SameAs(b), a.SameAs(c), (Machine{}).SameAs(Machine{}))
	}
	if m := LocalMachine(); m.CPUs == 0 || m.Key() == "" {
		t.Errorf("LocalMachine() = %+v: no CPUs or key", m)
	}
}

func TestParamsHash(t *testing.T) {
	type params struct {
		QPS  []int
		Mode map[string]bool
	}
	h1, err := ParamsHash(params{QPS: []int{1000}, Mode: map[string]bool{"a": true, "b": false}})
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := ParamsHash(params{QPS: []int{1000}, Mode: map[string]bool{"b": false, "a": true}})
	h3, _ := ParamsHash(params{QPS: []int{500}, Mode: map[string]bool{"a": true, "b": false}})
	if h1 != h2 || h1 == h3 || len(h1) != 16 {
		t.Errorf("hashes %q %q %q: want equal parameters equal, others different, 16 hex digits", h1, h2, h3)
	}
	if _, err := ParamsHash(func() {}); err == nil {
		t.Error("hashing a func did not fail")
	}
}

// A team's writers need not own the database: a user with SELECT, INSERT
// and UPDATE on the tables (and nothing on the schema or the id
// sequences) opens a store another user created and writes runs to it.
func TestPostgresStoreWithoutCreateRights(t *testing.T) {
	db := pgtest.NewDatabase(t)
	openStore(t, db).Close()
	st := openStore(t, pgRole(t, db, "schema_version, runs, processes, run_percentiles, run_histogram, run_prometheus, run_graph, run_graph_services, run_graph_transactions, run_sweeps, cp_runs"))
	if err := st.Insert(sampleRun("w1", "quick", time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertControlPlaneRun(sampleControlPlaneRun(time.Now())); err != nil {
		t.Fatal(err)
	}
	if err := st.InsertSweep(sampleSweep("w1")); err != nil {
		t.Fatal(err)
	}
	if runs, err := st.Runs(Filter{RunID: "w1"}); err != nil || len(runs) != 1 || len(runs[0].Processes) != 2 {
		t.Fatalf("read back %+v, %v", runs, err)
	}
}

// pgRole creates a login role on db's server with SELECT, INSERT and
// UPDATE on the tables listed, nothing else (not even CREATE on the
// schema), and returns db's URL as that role; the role goes when t ends.
func pgRole(t *testing.T, db, tables string) string {
	t.Helper()
	admin, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	role := "writer_" + strings.TrimPrefix(u.Path, "/") // databases are per test, so roles are too
	for _, q := range []string{
		`CREATE ROLE ` + role + ` LOGIN PASSWORD 'w'`,
		`REVOKE CREATE ON SCHEMA public FROM PUBLIC`,
		`GRANT SELECT, INSERT, UPDATE ON ` + tables + ` TO ` + role,
	} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() {
		for _, q := range []string{`DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := admin.Exec(q); err != nil {
				t.Errorf("%s: %v", q, err)
			}
		}
	})
	u.User = url.UserPassword(role, "w")
	return u.String()
}
