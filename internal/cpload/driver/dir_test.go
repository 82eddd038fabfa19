package driver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

func TestDirApplierWritesOneFilePerObjectAndDeletes(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "config")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d := &DirApplier{Dir: dir}
	rs := shape.ServiceGatewayVS("istioinaction", 3)
	ctx := context.Background()
	if err := d.Apply(ctx, rs); err != nil {
		t.Fatal(err)
	}
	// Only the objects' files, in the directory and beside it: the
	// temporaries were written in the staging directory, which is gone.
	if all, _ := os.ReadDir(dir); len(all) != len(rs) {
		t.Fatalf("%d entries for %d objects: %v", len(all), len(rs), all)
	}
	if beside, _ := os.ReadDir(parent); len(beside) != 1 {
		t.Fatalf("beside the directory: %v", beside)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != len(rs) {
		t.Fatalf("%d files for %d objects: %v", len(files), len(rs), files)
	}
	var back []*config.Resource
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := config.Decode(f, data)
		if err != nil {
			t.Fatalf("%s does not decode: %v", f, err)
		}
		back = append(back, got...)
	}
	if len(back) != len(rs) {
		t.Fatalf("decoded %d objects, wrote %d", len(back), len(rs))
	}
	if err := d.Delete(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, rs); err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}
