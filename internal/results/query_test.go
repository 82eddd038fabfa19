package results

import (
	"testing"
	"time"
)

func TestScenariosCountsInvocationsAndRuns(t *testing.T) {
	forEachDialect(t, testScenariosCountsInvocationsAndRuns)
}

func testScenariosCountsInvocationsAndRuns(t *testing.T, db string, _ conn) {
	st := openStore(t, db)
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	for i, r := range []struct{ runID, scenario string }{{"a", "quick"}, {"a", "quick"}, {"b", "quick"}, {"c", "latency"}} {
		if err := st.Insert(Run{RunID: r.runID, Scenario: r.scenario, StartTime: t0.Add(time.Duration(i) * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := st.Scenarios()
	if err != nil {
		t.Fatal(err)
	}
	want := []ScenarioRuns{
		{Scenario: "latency", Invocations: 1, Runs: 1, First: t0.Add(3 * time.Hour), Last: t0.Add(3 * time.Hour)},
		{Scenario: "quick", Invocations: 2, Runs: 3, First: t0, Last: t0.Add(2 * time.Hour)},
	}
	if len(got) != len(want) {
		t.Fatalf("%+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%+v, want %+v", got[i], want[i])
		}
	}
}
