package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// MeshperfBinaryEnv names a built meshperf for the tests that run it as a
// child process; scripts/test sets it to bin/meshperf.
const MeshperfBinaryEnv = "MESHPERF_BIN"

var meshperfBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// MeshperfBinary is the meshperf binary a test runs as a child process:
// MESHPERF_BIN when set, else one built once per test binary, static (into a
// temporary directory that outlives the tests; the OS cleans it).
func MeshperfBinary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv(MeshperfBinaryEnv); b != "" {
		return b
	}
	b := &meshperfBuild
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "meshperf-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "meshperf")
		// Static, as scripts build it, so that tests may pack it into images.
		cmd := exec.Command("go", "build", "-o", b.path, "github.com/meshperf/meshperf/cmd/meshperf")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("build meshperf: %v\n%s", b.err, b.out)
	}
	return b.path
}
