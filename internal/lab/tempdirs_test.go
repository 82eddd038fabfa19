package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// lab clean removes the temporary directories (tokens, ZDS sockets) of runs
// whose process is gone, and keeps a running one's.
func TestCleanRunTempDirsRemovesOnlyDeadRuns(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	running, err := makeRunTempDir("secrets", "r1", 0o711)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(running); err != nil || info.Mode().Perm() != 0o711 {
		t.Fatalf("made %s: %v, mode %v, want 0711", running, err, info.Mode().Perm())
	}
	killed, err := makeRunTempDir("zds", "r2", 0o700)
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(killed, runTempOwner), []byte(strconv.Itoa(dead.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	unowned := filepath.Join(os.TempDir(), runTempPrefix+"secrets-r3-x")
	other := filepath.Join(os.TempDir(), "someone-elses")
	for _, d := range []string{unowned, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := CleanRunTempDirs()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	if want := []string{unowned, killed}; !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, d := range []string{running, other} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s: %v, want it kept", d, err)
		}
	}
	for _, d := range []string{unowned, killed} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want it removed", d, err)
		}
	}
}
