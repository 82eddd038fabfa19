package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A run keeps two things outside its output directory, in the system's
// temporary directory: the pods' tokens and the mesh root, which the
// sidecars' uid 1337 must reach (an output directory's parents, a home or
// a test's temporary directory, may not let it), and the nodes' ZDS
// sockets, whose paths a unix socket limits to 107 bytes. A run removes
// them when it ends; one that was killed leaves them, tokens valid for a
// day among them, so each directory names the process that made it and
// `meshperf lab clean` removes those whose process is gone.

// runTempPrefix starts the name of every such directory.
const runTempPrefix = "meshperf-run-"

// runTempOwner is the file, in each such directory, that holds the pid of
// the process that made it.
const runTempOwner = "owner.pid"

// makeRunTempDir makes a directory for run's what (secrets, zds) in the
// system's temporary directory, with perm, owned by this process.
func makeRunTempDir(what, runID string, perm os.FileMode) (string, error) {
	dir, err := os.MkdirTemp("", runTempPrefix+what+"-"+runID+"-")
	if err != nil {
		return "", err
	}
	err = os.WriteFile(filepath.Join(dir, runTempOwner), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600)
	if err == nil {
		err = os.Chmod(dir, perm)
	}
	if err != nil {
		return "", errors.Join(err, os.RemoveAll(dir))
	}
	return dir, nil
}

// CleanRunTempDirs removes the temporary directories of runs whose process
// is gone (killed, or crashed before it could remove them) and returns
// their paths; a running lab's are kept.
func CleanRunTempDirs() ([]string, error) {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("clean: list %s: %w", os.TempDir(), err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), runTempPrefix) {
			continue
		}
		dir := filepath.Join(os.TempDir(), e.Name())
		if ownerRuns(dir) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("clean: %w", err))
			continue
		}
		removed = append(removed, dir)
	}
	return removed, errors.Join(errs...)
}

// ownerRuns says whether the process that made dir still runs. A directory
// without a readable owner is one whose run died while making it.
func ownerRuns(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, runTempOwner))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	// Signal 0 checks that the process exists without touching it; EPERM
	// means it exists under another user.
	err = syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
