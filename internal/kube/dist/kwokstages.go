package dist

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// KwokStagesDir is the directory, beside the binaries in the cache, that
// holds kwok's stage files: `meshperf cluster build` copies them there
// from kwok's module, and runs read them from there only (the Go module
// cache may be cleaned, or belong to another user).
const KwokStagesDir = "kwok-stages"

// kwokStageRoot is where the stage files are in kwok's module.
const kwokStageRoot = "kustomize/stage"

// KwokStageFiles are the kwok module's "fast" stages a run needs, relative
// to its kustomize/stage directory and to KwokStagesDir: nodes become
// Ready and keep a heartbeat (else the node lifecycle controller would
// evict their pods), pods become Ready at once and go when deleted.
var KwokStageFiles = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat/node-heartbeat.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

// KwokStages returns the paths of the stage files in b's cache, or an
// error matching ErrNotBuilt naming the first missing one.
func (b Bins) KwokStages() ([]string, error) {
	files := make([]string, 0, len(KwokStageFiles))
	for _, f := range KwokStageFiles {
		p := filepath.Join(b.Dir, KwokStagesDir, filepath.FromSlash(f))
		if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
			return nil, fmt.Errorf("%w: no kwok %s stage %s: run `meshperf cluster build`", ErrNotBuilt, KwokVersion, p)
		}
		files = append(files, p)
	}
	return files, nil
}

// copyKwokStages copies kwok's stage files from its module, which the go
// command downloads (from its module cache when there), into
// dir/KwokStagesDir. The files are kwok's own definitions, never part of
// the repository. A copy is made beside and renamed into place, so that an
// interrupted one leaves none that KwokStages would accept.
func copyKwokStages(ctx context.Context, goTool, dir string) error {
	module, err := kwokModuleDir(ctx, goTool)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, KwokStagesDir+".tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	for _, f := range KwokStageFiles {
		data, err := os.ReadFile(filepath.Join(module, filepath.FromSlash(kwokStageRoot), filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("kwok %s's stage: %w", KwokVersion, err)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	final := filepath.Join(dir, KwokStagesDir)
	if err := os.RemoveAll(final); err != nil { // an incomplete earlier copy
		return err
	}
	return os.Rename(tmp, final)
}

// kwokModuleDir downloads kwok's module (a no-op when cached) and returns
// its directory, as the go command reports it.
func kwokModuleDir(ctx context.Context, goTool string) (string, error) {
	work, err := os.MkdirTemp("", "meshperf-kwok-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	// Outside any module, so that only kwok's is resolved.
	cmd := exec.CommandContext(ctx, goTool, "mod", "download", "-json", "sigs.k8s.io/kwok@"+KwokVersion)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var mod struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &mod); jerr == nil && mod.Error != "" {
		return "", fmt.Errorf("kwok %s's module: %s", KwokVersion, mod.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download sigs.k8s.io/kwok@%s: %v: %s", KwokVersion, err, lastLines(stderr.String(), 5))
	}
	if mod.Dir == "" {
		return "", fmt.Errorf("go mod download sigs.k8s.io/kwok@%s named no directory", KwokVersion)
	}
	return mod.Dir, nil
}
