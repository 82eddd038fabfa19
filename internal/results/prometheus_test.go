package results

import (
	"database/sql"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStorePrometheusRoundTrip(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r := sampleRun("pp", "quick", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	// Stored in role order; a TCP-like proxy with no request figures keeps
	// them unknown (NULL), not zero.
	r.Prometheus = []PromFigures{
		{Role: RoleClientSidecar, VCPU: 0.11, RSSMB: 12.5, MaxRSSMB: 13, RPS: 999.8, P50: 0.31, P90: 0.52, P99: 0.98},
		{Role: RoleServerSidecar, VCPU: 0.19, RSSMB: 14.25, MaxRSSMB: 15, RPS: math.NaN(), P50: math.NaN(), P90: math.NaN(), P99: math.NaN()},
	}
	plain := sampleRun("qq", "quick", time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC))
	for _, run := range []Run{r, plain} {
		if err := st.Insert(run); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := st.Runs(Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	got := runs[0].Prometheus
	if len(got) != 2 || !reflect.DeepEqual(got[0], r.Prometheus[0]) || got[1].Role != RoleServerSidecar ||
		got[1].VCPU != 0.19 || got[1].RSSMB != 14.25 || !math.IsNaN(got[1].RPS) || !math.IsNaN(got[1].P99) {
		t.Errorf("Prometheus figures after a round trip: %+v, want %+v", got, r.Prometheus)
	}
	if runs[1].Prometheus != nil {
		t.Errorf("a run stored without Prometheus figures read back with %+v", runs[1].Prometheus)
	}
	// The report pairs each with its process's /proc figures.
	pairs := runs[0].PromVsProc()
	if len(pairs) != 2 || pairs[0].Proc.PID != 11 || pairs[1].Proc.VCPU != 0.2 {
		t.Errorf("PromVsProc = %+v", pairs)
	}
	// Deleting a run deletes its figures (the foreign key cascades).
	if _, err := st.db.Exec(`DELETE FROM runs WHERE run_id = 'pp'`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := st.db.QueryRow(`SELECT count(*) FROM run_prometheus`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d Prometheus rows left after deleting their run (%v)", n, err)
	}
}

func TestStoreMigratesSchema5ToPrometheus(t *testing.T) {
	// A schema-5 database: opening it adds run_prometheus, and a run with
	// Prometheus figures is stored and read back.
	path := databaseAtSchema(t, 5)
	st, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if v, _ := st.Version(); v != SchemaVersion {
		t.Fatalf("version %d after migration, want %d", v, SchemaVersion)
	}
	r := sampleRun("new", "quick", time.Now())
	r.Prometheus = []PromFigures{{Role: RoleClientSidecar, VCPU: 0.5, RSSMB: 10, MaxRSSMB: 11, RPS: 100, P50: 1, P90: 2, P99: 3}}
	if err := st.Insert(r); err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(Filter{})
	if err != nil || len(runs) != 1 || !reflect.DeepEqual(runs[0].Prometheus, r.Prometheus) {
		t.Fatalf("after migration: %+v, %v", runs, err)
	}
}

// The report and the terminal summary show Prometheus' figures beside the
// /proc ones only when a run has them.
func TestPromVsProcShownWhenMeasured(t *testing.T) {
	r := sampleRun("pp", "quick", time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	var html, text strings.Builder
	if err := WriteHTML(&html, []Run{r}, Summarize([]Run{r})); err != nil {
		t.Fatal(err)
	}
	if err := WritePromVsProc(&text, []Run{r}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(html.String(), `id="prometheus"`) || text.Len() != 0 {
		t.Errorf("Prometheus vs /proc shown for a run without Prometheus figures: %q", text.String())
	}
	r.Prometheus = []PromFigures{{Role: RoleServerSidecar, VCPU: 0.2345, RSSMB: 14.25, MaxRSSMB: 15, RPS: 998.7, P50: 0.31, P90: 0.52, P99: math.NaN()}}
	html.Reset()
	if err := WriteHTML(&html, []Run{r}, Summarize([]Run{r})); err != nil {
		t.Fatal(err)
	}
	if err := WritePromVsProc(&text, []Run{r}); err != nil {
		t.Fatal(err)
	}
	// The server sidecar's /proc vCPU (0.200) beside Prometheus' (0.234).
	row := `<td class="l">server-sidecar</td><td>0.200</td><td>0.234</td><td>14.0</td><td>14.2</td><td>999.5</td><td>998.7</td><td>0.310</td><td>0.520</td><td>-</td>`
	if !strings.Contains(html.String(), `<table id="prometheus">`) || !strings.Contains(html.String(), row) {
		t.Errorf("report's Prometheus vs /proc table lacks the row %s", row)
	}
	if !strings.Contains(text.String(), "Prometheus vs /proc") || !strings.Contains(text.String(), "0.200") || !strings.Contains(text.String(), "0.234") {
		t.Errorf("summary:\n%s", text.String())
	}
}

// databaseAtSchema makes a database at an older schema version, as a
// meshperf of that version left it, then runs extra statements in it (rows
// of that version), and returns its path.
func databaseAtSchema(t *testing.T, version int, extra ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stmts := append([]string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version VALUES (` + strconv.Itoa(version) + `)`},
		migrations[:version]...)
	for _, q := range append(stmts, extra...) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return path
}
