package results

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(filepath.Join(dir, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a1, a2 := sampleRun("aa", "quick", t0), sampleRun("aa", "quick", t0.Add(time.Minute))
	a2.Repetition = 3
	b := sampleRun("bb", "quick", t0.Add(time.Hour))
	b.Provenance.Labels = "candidate"
	for _, r := range []Run{a1, a2, b} {
		if err := st.Insert(r); err != nil {
			t.Fatal(err)
		}
	}
	labDir := filepath.Join(dir, "lab", "aa")
	if err := os.MkdirAll(labDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(labDir, "aa.csv"), []byte("Labels\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A load result with meshperf's provenance in it.
	fortio, err := os.ReadFile(filepath.Join("testdata", "fortio-http.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(fortio, &doc); err != nil {
		t.Fatal(err)
	}
	doc["Provenance"] = sampleProvenance()
	withProv, _ := json.Marshal(doc)
	file := filepath.Join(dir, "load.json")
	if err := os.WriteFile(file, withProv, 0o644); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		arg       string
		wantIDs   string
		wantError string
	}{
		{arg: "aa", wantIDs: "aa,aa"},
		{arg: labDir, wantIDs: "aa,aa"},
		{arg: "candidate", wantIDs: "bb"},
		{arg: "nightly", wantIDs: "aa,aa"},
		{arg: b.Label, wantIDs: "bb"},
		{arg: file, wantIDs: ""},
		{arg: "nope", wantError: `no run matches "nope": not a run id or label in`},
		{arg: dir, wantError: "not a lab output directory (want one <runid>.csv in it, found 0)"},
		{arg: "", wantError: "empty run selector"},
	} {
		runs, err := Resolve(st, c.arg)
		if c.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantError) {
				t.Errorf("Resolve(%q) error = %v, want %q", c.arg, err, c.wantError)
			}
			continue
		}
		if err != nil {
			t.Errorf("Resolve(%q): %v", c.arg, err)
			continue
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.RunID)
		}
		if got := strings.Join(ids, ","); got != c.wantIDs {
			t.Errorf("Resolve(%q) = runs %q, want %q", c.arg, got, c.wantIDs)
		}
	}
	runs, err := Resolve(st, file)
	if err != nil || len(runs) != 1 || runs[0].Provenance != sampleProvenance() || runs[0].FortioJSON != file {
		t.Errorf("Resolve(file) = %+v, %v: want one run with the file's provenance", runs, err)
	}
	// ResolveStored reads the store only: the same ids and labels, but a
	// path on the machine is no selector.
	for arg, want := range map[string]string{"aa": "aa,aa", "candidate": "bb", b.Label: "bb"} {
		runs, err := ResolveStored(st, arg)
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.RunID)
		}
		if err != nil || strings.Join(ids, ",") != want {
			t.Errorf("ResolveStored(%q) = runs %q, %v; want %q", arg, ids, err, want)
		}
	}
	for _, arg := range []string{file, labDir} {
		if _, err := ResolveStored(st, arg); !errors.Is(err, ErrNoRunMatches) || !strings.Contains(err.Error(), "not a run id or label in") {
			t.Errorf("ResolveStored(%q) = %v, want no match: it reads no files", arg, err)
		}
	}
	// Without a store only files are read.
	if _, err := Resolve(nil, "aa"); err == nil || !strings.Contains(err.Error(), "no results database") {
		t.Errorf("Resolve(nil, run id) = %v", err)
	}
	if _, err := Resolve(nil, labDir); err == nil || !strings.Contains(err.Error(), "needs the results database") {
		t.Errorf("Resolve(nil, lab dir) = %v", err)
	}
}
