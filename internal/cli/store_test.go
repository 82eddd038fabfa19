package cli

import (
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/results"
	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

// A team's store on PostgreSQL, end to end through the commands: history
// moved in with store copy, then compare and history read it and give what
// they give on the SQLite file it came from; a Fortio result imported
// into it; the dashboard's API serves it; and it copies back out.
func TestPostgresStoreEndToEnd(t *testing.T) {
	pg := pgtest.NewDatabase(t)
	lab := newLabStore(t)
	here := results.LocalMachine()
	for range 5 {
		lab.invocation("1.0.0", here, 2)
	}
	for range 5 {
		lab.invocation("1.1.0", here, 2.5)
	}
	sqliteDB := compareStoreInto(t, lab.path)

	code, out, errOut := runCLI(t, Store, "copy", "--from", lab.path, "--to", pg)
	if code != exitOK || !strings.Contains(out, "copied 150 runs (0 already there)") || errOut != "" {
		t.Fatalf("store copy to postgres: exit %d, %q, %q", code, out, errOut)
	}
	if strings.Contains(out, pgtest.Password) || !strings.Contains(out, "xxxxx") {
		t.Errorf("store copy names the store with its password, or not at all: %q", out)
	}
	code, out, _ = runCLI(t, Store, "copy", "--from", lab.path, "--to", pg)
	if code != exitOK || !strings.Contains(out, "copied 0 runs (150 already there)") {
		t.Fatalf("second store copy: exit %d, %q; want everything skipped", code, out)
	}

	// Readers give the same answers from either store.
	for _, args := range [][]string{{"v1", "v2", "-json"}, {"v1", "v1-again"}} {
		fileCode, fileOut, _ := runCLI(t, Compare, append([]string{"-db", sqliteDB}, args...)...)
		pgCode, pgOut, pgErr := runCLI(t, Compare, append([]string{"-db", pg}, args...)...)
		if pgCode != fileCode || pgOut != fileOut || pgErr != "" {
			t.Errorf("compare %v: postgres exit %d (stderr %q), SQLite %d; same output: %v", args, pgCode, pgErr, fileCode, pgOut == fileOut)
		}
	}
	fileCode, fileOut, _ := runHistory(t, "-db", lab.path, "quick", "-json")
	pgCode, pgOut, pgErr := runHistory(t, "-db", pg, "quick", "-json")
	if h := decodeHistory(t, pgOut); pgCode != exitFailed || !h.Regression || len(h.Points) != 10 {
		t.Errorf("history on postgres: exit %d (stderr %q), %d points, regression %v; want 1, 10, true", pgCode, pgErr, len(h.Points), h.Regression)
	}
	if pgCode != fileCode || pgOut != fileOut {
		t.Errorf("history differs between the stores: exit %d vs %d\n%s\n%s", pgCode, fileCode, pgOut, fileOut)
	}

	// A Fortio result imported straight into it, and exported back.
	fortio, err := filepath.Abs("../results/testdata/fortio-http.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir()) // import keeps its copy under results/imported here
	code, out, errOut = runCLI(t, Import, "-db", pg, "-labels", "imported-into-pg", fortio)
	if code != exitOK {
		t.Fatalf("import into postgres: exit %d, %q", code, errOut)
	}
	runID := strings.TrimSpace(out)
	code, out, _ = runCLI(t, Export, "-db", pg, "--format", "fortio", runID)
	original, _ := os.ReadFile(fortio)
	if code != exitOK || out != string(original) {
		t.Errorf("export from postgres: exit %d, the imported bytes back: %v", code, out == string(original))
	}

	// The dashboard's API reads it.
	assertDashboardScenarios(t, pg, map[string]int{"quick": 150, "imported": 1})

	// And everything copies back out, into a new SQLite file.
	back := filepath.Join(t.TempDir(), "back", "meshperf.db")
	code, out, errOut = runCLI(t, Store, "copy", "--from", pg, "--to", "sqlite:"+back)
	if code != exitOK || !strings.Contains(out, "copied 151 runs (0 already there)") {
		t.Fatalf("store copy from postgres: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = runCLI(t, Store, "info", back)
	for _, want := range []string{"dialect             sqlite", fmt.Sprintf("schema version      %d", results.SchemaVersion), "runs                151 (14 invocations)"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("store info: exit %d, %q lacks %q", code, out, want)
		}
	}
	code, out, _ = runCLI(t, Store, "info", pg)
	if code != exitOK || !strings.Contains(out, "dialect             postgres") || strings.Contains(out, pgtest.Password) {
		t.Errorf("store info on postgres: exit %d, %q", code, out)
	}
}

// compareStoreInto adds compareStore's three invocations to the lab store
// at path, so that one store has runs for both compare and history; it
// returns path.
func compareStoreInto(t *testing.T, path string) string {
	t.Helper()
	src, err := results.Open(compareStore(t))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := results.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := results.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	return path
}

// assertDashboardScenarios serves db with meshperf dashboard and checks
// /api/scenarios' run counts, and that the password is not printed.
func assertDashboardScenarios(t *testing.T, db string, want map[string]int) {
	t.Helper()
	scenarios, _, stdout := dashboardScenarios(t, db)
	if strings.Contains(stdout, pgtest.Password) || !strings.Contains(stdout, "xxxxx") {
		t.Errorf("the dashboard names the store with its password, or not at all: %q", stdout)
	}
	got := map[string]int{}
	for _, s := range scenarios {
		got[s.Scenario] = s.Runs
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("GET /api/scenarios: %v; want %v", got, want)
	}
}

// A -db that names no database is bad input (exit 2) and one that cannot
// be opened a failure (exit 1): one line each, never with the password,
// and nothing created or run.
func TestStoreURLsRefused(t *testing.T) {
	port := pgtest.Port(t)
	dir := t.TempDir()
	t.Chdir(dir)
	malformed := "postgres://bench:s3cret@db.example:notaport/meshperf"
	refused := "postgres://bench:s3cret@127.0.0.1:1/meshperf?connect_timeout=5"
	wrongPassword := fmt.Sprintf("postgres://%s:s3cret@127.0.0.1:%d/postgres?sslmode=disable", pgtest.User, port)
	for _, c := range []struct {
		command func([]string, io.Writer, io.Writer) int
		args    []string
		code    int
		want    string
	}{
		{Import, []string{"-db", malformed, "../x.json"}, exitBadInput, "not a PostgreSQL URL"},
		{History, []string{"-db", malformed}, exitBadInput, "not a PostgreSQL URL"},
		{Compare, []string{"-db", "mysql://bench:s3cret@h/db", "a", "b"}, exitBadInput, "unknown scheme mysql"},
		{History, []string{"-db", refused}, exitFailed, "connect"},
		{History, []string{"-db", wrongPassword}, exitFailed, "password authentication failed"},
		{Store, []string{"copy", "--from", wrongPassword, "--to", "new.db"}, exitFailed, "password authentication failed"},
		{Store, []string{"copy", "--from", "missing.db", "--to", "new.db"}, exitBadInput, "missing.db: no such file"},
		{Store, []string{"copy", "--from", "new.db", "--to", "new.db"}, exitBadInput, "the same store"},
		{Store, []string{"info", refused}, exitFailed, "connect"},
	} {
		code, out, errOut := runCLI(t, c.command, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and one line saying %q", c.args, code, out, errOut, c.code, c.want)
		}
		if strings.Contains(errOut, "s3cret") {
			t.Errorf("%v: the password is in %q", c.args, errOut)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused commands left %v behind", entries)
	}
}

// store copy refuses a destination a newer meshperf wrote, and writes
// nothing to it.
func TestStoreCopyRefusesNewerDestination(t *testing.T) {
	pg := pgtest.NewDatabase(t)
	st, err := results.Open(pg)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE schema_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	lab := newLabStore(t)
	lab.invocation("1.0.0", results.LocalMachine(), 2)
	code, _, errOut := runCLI(t, Store, "copy", "--from", lab.path, "--to", pg)
	if code != exitFailed || !strings.Contains(errOut, "newer than this meshperf understands") {
		t.Errorf("exit %d, %q; want 1, newer schema", code, errOut)
	}
	var runs int
	if err := raw.QueryRow(`SELECT COUNT(*) FROM runs`).Scan(&runs); err != nil || runs != 0 {
		t.Errorf("%d runs in the refused destination, %v", runs, err)
	}
}
