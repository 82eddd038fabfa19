package driver_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/proc"
)

// TestRunThroughADirectoryWaitsUntilTheMeshIsRead runs cpload against a
// control plane watching a directory (meshperf pilot --configDir, as
// istiod's file mode): the mesh and the churn go through files, cpload waits
// until the control plane has read the mesh before the fleet connects, and
// leaves the directory holding the mesh alone. A directory nobody watches
// is one error naming it.
func TestRunThroughADirectoryWaitsUntilTheMeshIsRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	p, err := proc.StartPilot(ctx, proc.PilotOptions{Command: append(pilotCommand(t), "--configDir", dir),
		DataDir: t.TempDir(), LogLevel: "warn"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop() }()
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if m, err = shape.InForm(m, shape.FormServiceEntries, "cluster.local"); err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	c := driver.Config{Name: "dir", Shape: "uniform", Mesh: m, Scoping: driver.ScopeNamespace, NoSDS: true,
		Churn: driver.ChurnConfig, Namespace: "ns-0", Rate: 4, Duration: time.Second,
		Target: p.Addrs.GRPC, ApplyWith: "dir:" + dir, MetricsURL: p.MetricsURL(), ConnectRate: -1,
		Timeout: 20 * time.Second, Progress: &progress}
	r, err := driver.Run(ctx, c)
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if !strings.Contains(progress.String(), "waiting for the control plane to read the mesh from "+dir) {
		t.Errorf("no wait for the directory to be read:\n%s", progress.String())
	}
	if r.Churn == nil || r.Churn.Changes != 4 || r.Churn.Missed != 0 || r.Churn.EndToEnd.N != r.Churn.Expected {
		t.Errorf("churn through the directory: %+v", r.Churn)
	}
	files, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.Contains(f.Name(), "cpload-mesh-loaded") {
			t.Errorf("the marker %s is still in the directory", f.Name())
		}
	}
	if len(files) < len(m.All()) {
		t.Errorf("%d files in the directory, fewer than the mesh's %d objects", len(files), len(m.All()))
	}

	c.ApplyWith, c.Churn, c.Timeout, c.Progress = "dir:"+t.TempDir(), driver.ChurnNone, 2*time.Second, nil
	_, err = driver.Run(ctx, c)
	if err == nil || !strings.Contains(err.Error(), "the control plane did not read the mesh from "+strings.TrimPrefix(c.ApplyWith, "dir:")) {
		t.Errorf("a directory the control plane does not watch: %v", err)
	}
}
