package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
