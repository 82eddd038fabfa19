package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
)

// TestCploadBadInput: wrong flags and combinations are one line and exit 2,
// before anything is started.
func TestCploadBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"walk"}, `unknown command "walk" (meshperf cpload help lists them)`},
		{[]string{"run", "--shape", "torus"}, `--shape "torus"`},
		{[]string{"run", "--sidecar", "some"}, `--sidecar "some"`},
		{[]string{"run", "--delta", "--sotw"}, "exclude each other"},
		{[]string{"run", "--churn", "config", "--rate", "0"}, "--rate and --duration must be positive"},
		{[]string{"run", "--target", "127.0.0.1:1"}, "--churn needs a way to change config"},
		{[]string{"run", "--target", "127.0.0.1:1", "--churn", "none", "--apply-with", "kubectl"}, `--apply-with "kubectl"`},
		{[]string{"lab", "extra"}, `unexpected argument "extra"`},
		{[]string{"scale", "--steps", "2,1"}, "the sizes must increase"},
		{[]string{"run", "--form", "crds"}, `--form "crds": want services or serviceentries`},
		{[]string{"run", "--kube", "--form", "serviceentries"}, "with --kube the mesh is Services and pods"},
		{[]string{"scale", "--steps", "1,two"}, `--steps "1,two": want positive whole multiples`},
		{[]string{"scale", "--steps", "0"}, "want positive whole multiples"},
		{[]string{"scale", "--kube"}, "cpload scale runs off Kubernetes so far"},
		{[]string{"scale", "--html", "/nonexistent/dir/scale.html"}, "--html /nonexistent/dir/scale.html: the directory /nonexistent/dir does not exist"},
		{[]string{"run", "--shard", "3/2"}, `-shard "3/2": want I/N`},
		{[]string{"run", "--shard", "2/2", "--churn", "none"}, "the shards need a shared --target"},
		{[]string{"run", "--shard", "1/2", "--target", "127.0.0.1:1", "--churn", "none"}, "shard 1 needs --metrics-url"},
		{[]string{"run", "--shard", "2/2", "--target", "127.0.0.1:1", "--churn", "endpoints"}, "use --churn config or perftest"},
		{[]string{"merge"}, "no reports: give every shard's --json report"},
		{[]string{"merge", "/nonexistent/shard1.json"}, "/nonexistent/shard1.json"},
	} {
		var stdout, stderr bytes.Buffer
		code := runCpload(context.Background(), tc.args, &stdout, &stderr, []string{"/nonexistent"})
		if code != exitBadInput || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line containing %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// --no-sds reaches the driver: the simulated sidecars subscribe to no
// secrets (against istiod; with --kube the driver sets it itself, the
// pilot there serving no secrets over SDS).
func TestCploadNoSDSFlag(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		wantNoSDS bool
	}{
		{nil, false},
		{[]string{"--no-sds"}, true},
	} {
		cmd := newCommand("meshperf cpload run", "[flags]", "")
		var f cploadRunFlags
		f.define(cmd.flags)
		if err := cmd.parseFlagsOnly(tc.args, io.Discard); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		f.kubeDefaults(cmd.flags)
		c, err := f.config([]string{"/nonexistent"}, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if c.NoSDS != tc.wantNoSDS {
			t.Errorf("%v: NoSDS = %v, want %v", tc.args, c.NoSDS, tc.wantNoSDS)
		}
	}
}

// A page that cannot be written after the run is one line (exit 1 by the
// command's exit): here the path is a directory.
// A file that is not a cpload report is one line naming it (exit 2).
func TestCploadMergeNotAReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.json")
	if err := os.WriteFile(path, []byte("shard one went fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runCpload(context.Background(), []string{"merge", path}, &stdout, &stderr, nil)
	if code != exitBadInput || !strings.Contains(stderr.String(), path+" is not a cpload run --json report") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestWriteScalePageFails(t *testing.T) {
	sr := &driver.ScaleReport{Steps: []driver.ScaleStep{{Multiple: 1, Proxies: 10, Services: 5, SyncedMs: 100, Report: &driver.Report{Shape: "uniform"}}}}
	dir := t.TempDir()
	err := writeScalePage(dir, sr)
	if err == nil || !strings.Contains(err.Error(), "write --html "+dir) || strings.Contains(err.Error(), "\n") {
		t.Errorf("writing the page over a directory: %v, want one line naming --html", err)
	}
	var stderr bytes.Buffer
	if code := exitStatus(&stderr, "meshperf cpload scale", err); code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	page := filepath.Join(dir, "scale.html")
	if err := writeScalePage(page, sr); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(page); err != nil || !strings.Contains(string(b), "<h1>meshperf cpload scale: uniform mesh</h1>") {
		t.Errorf("page written: %v, %.200q", err, b)
	}
}

// cpload merge reads the shards' --json reports, prints one report of the
// whole fleet, writes it with --json and stores it as one cp_runs row.
func TestCploadMergeWritesAndStores(t *testing.T) {
	dir := t.TempDir()
	applied := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	var files []string
	for i := 1; i <= 2; i++ {
		r := driver.Report{Name: "sharded", Shape: "uniform", Proxies: 3, Services: 4,
			Churn: &driver.ChurnFigures{Kind: driver.ChurnConfig, Changes: 1},
			Shard: &driver.ShardFigures{Shard: driver.Shard{Index: i, Count: 2},
				Run:           driver.RunIdentity{Shape: "uniform", Fleet: "f00d", FleetProxies: 6, Churn: driver.ChurnConfig},
				FirstConfigMs: []float64{10, 20, 30}, Sidecars: 3,
				Changes: []driver.ShardChange{{Label: "churn-0", Expected: 3,
					Arrivals: []int64{applied.Add(100 * time.Millisecond).UnixNano(), applied.Add(200 * time.Millisecond).UnixNano()}}}}}
		if i == 1 {
			r.Shard.Changes[0].Applied = applied
		} else {
			r.Churn = nil // only shard 1 makes the changes
		}
		b, err := json.Marshal(&r)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, fmt.Sprintf("shard%d.json", i))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, path)
	}
	out, db := filepath.Join(dir, "merged.json"), filepath.Join(dir, "meshperf.db")
	var stdout, stderr bytes.Buffer
	code := runCpload(context.Background(), append([]string{"merge", "--json", out, "--db", db}, files...), &stdout, &stderr, nil)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// 2 of 3 proxies in each shard received the change: 4 deliveries, 2 missed.
	if !strings.Contains(stdout.String(), "6 simulated proxies") || !strings.Contains(stdout.String(), "over 4 deliveries, 2 missed") {
		t.Errorf("merged report:\n%s", stdout.String())
	}
	var merged driver.Report
	if b, err := os.ReadFile(out); err != nil || json.Unmarshal(b, &merged) != nil || merged.Proxies != 6 || len(merged.Shards) != 2 {
		t.Errorf("--json %s: %v, %+v", out, err, merged)
	}
	st, err := openStore(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.ControlPlaneRuns()
	if err != nil || len(rows) != 1 || rows[0].Proxies != 6 || rows[0].Missed != 2 {
		t.Errorf("stored: %v, %+v", err, rows)
	}
}
