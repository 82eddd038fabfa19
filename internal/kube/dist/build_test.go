package dist_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/testenv"
)

// A cache whose every binary reports its pinned version is not rebuilt.
func TestBuildOfABuiltCacheBuildsNothing(t *testing.T) {
	bins := testenv.NeedKubernetes(t)
	var progress strings.Builder
	res, err := dist.Build(context.Background(), bins.Dir, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if !res.AlreadyBuilt || progress.Len() != 0 {
		t.Errorf("built again: %+v, progress %q", res, progress.String())
	}
}

func TestCheckVersionsNamesWhatIsWrong(t *testing.T) {
	bins := testenv.NeedKubernetes(t)
	if err := dist.CheckVersions(context.Background(), bins); err != nil {
		t.Fatalf("the built binaries: %v", err)
	}
	// A cache holding another binary under a pinned name is not the cache.
	dir := t.TempDir()
	for _, name := range dist.Names {
		src := bins.Path(name)
		if name == dist.Kwok {
			src = bins.Path(dist.CoreDNS)
		}
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	err := dist.CheckVersions(context.Background(), dist.Bins{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "kwok") || !strings.Contains(err.Error(), dist.KwokVersion) {
		t.Errorf("err = %v, want one naming kwok and its version", err)
	}
}
