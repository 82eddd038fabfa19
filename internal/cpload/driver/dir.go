package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshperf/meshperf/internal/atomicfile"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// DirApplier changes config by writing YAML files into the directory a
// control plane watches: istiod's `--configDir` (and meshperf pilot's), so
// that the same run can be made against both. One file per object, written
// to a temporary name and renamed, so the watcher never reads half a file.
// The temporaries are written beside the directory, not in it (staging):
// istiod walks the directory on every change and abandons a walk that finds
// a file gone, so with the temporaries inside, a mesh of thousands of files
// left it holding whatever its last complete walk saw.
type DirApplier struct {
	Dir string
}

// Apply writes each object's file.
func (d *DirApplier) Apply(_ context.Context, rs []*config.Resource) error {
	staging, err := d.staging()
	if err != nil {
		return err
	}
	defer os.Remove(staging) // only if empty: another Apply may be using it
	for _, r := range rs {
		data, err := shape.YAML([]*config.Resource{r})
		if err != nil {
			return err
		}
		path := d.path(r)
		if err := atomicfile.WriteStaged(path, staging, data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", r.Key(), err)
		}
	}
	return nil
}

// staging is the hidden directory beside Dir where Apply writes its
// temporary files, on Dir's file system so that renames into Dir work.
func (d *DirApplier) staging() (string, error) {
	clean := filepath.Clean(d.Dir)
	staging := filepath.Join(filepath.Dir(clean), "."+filepath.Base(clean)+".cpload-staging")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return "", fmt.Errorf("--apply-with dir:%s: a directory beside it for the files being written: %w", d.Dir, err)
	}
	return staging, nil
}

// Delete removes each object's file; one already gone is not an error.
func (d *DirApplier) Delete(_ context.Context, rs []*config.Resource) error {
	for _, r := range rs {
		if err := os.Remove(d.path(r)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("deleting %s: %w", r.Key(), err)
		}
	}
	return nil
}

// ConfigDumpBytes is unknown through a directory.
func (d *DirApplier) ConfigDumpBytes(context.Context, string) int64 { return 0 }

func (d *DirApplier) path(r *config.Resource) string {
	k := r.Key()
	name := strings.ToLower(string(k.Kind)) + "-" + k.Namespace + "-" + k.Name + ".yaml"
	return filepath.Join(d.Dir, strings.TrimPrefix(name, "-"))
}
