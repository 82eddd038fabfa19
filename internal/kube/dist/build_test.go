package dist_test

import (
	"context"
	"errors"
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

// A cache whose binaries are built but which lacks kwok's stages gets the
// stages, copied from kwok's module, and nothing is built; kwok's runs
// then read them from the cache.
func TestBuildAddsKwokStagesToABuiltCache(t *testing.T) {
	bins := testenv.NeedKubernetes(t)
	dir := t.TempDir()
	for _, name := range dist.Names {
		if err := os.Symlink(bins.Path(name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cache := dist.Bins{Dir: dir}
	if _, err := cache.KwokStages(); !errors.Is(err, dist.ErrNotBuilt) || !strings.Contains(err.Error(), "meshperf cluster build") {
		t.Fatalf("stages of a cache without them: err = %v, want ErrNotBuilt saying to run meshperf cluster build", err)
	}
	var progress strings.Builder
	res, err := dist.Build(context.Background(), dir, &progress)
	if err != nil {
		t.Fatal(err)
	}
	if res.AlreadyBuilt || !strings.Contains(progress.String(), "copy kwok's stages") || strings.Contains(progress.String(), "build ") {
		t.Errorf("result %+v, progress %q: want the stages copied and nothing built", res, progress.String())
	}
	files, err := cache.KwokStages()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), "kind: Stage") {
			t.Errorf("%s is not a kwok Stage:\n%s", f, data)
		}
	}
	if res, err := dist.Build(context.Background(), dir, &progress); err != nil || !res.AlreadyBuilt {
		t.Errorf("a second build: %+v, %v; want already built", res, err)
	}
}
