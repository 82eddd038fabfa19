package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Up takes a new or empty state directory only, and Down removes what Up
// put there and the directories it created, while they are empty.
func TestStateDirectoryIsCreatedAndRemovedWholeOrLeft(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "a", "b")
	created, err := makeStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(created, []string{filepath.Join(base, "a"), dir}) {
		t.Errorf("created %q", created)
	}
	for _, e := range []string{"pki/ca.crt", "logs/etcd.log", "state.json"} {
		p := filepath.Join(dir, e)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := makeStateDir(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("a non-empty state directory: %v", err)
	}
	// Something else in the parent by the time of down: the parent stays.
	other := filepath.Join(base, "a", "other")
	if err := os.WriteFile(other, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &state{StateDir: dir, Created: created, Host: HostState{Dirs: map[string]bool{}}}
	for _, d := range runtimeDirs {
		s.Host.Dirs[d] = true // leave the host's alone in this test
	}
	if err := removeNewDirs(s, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the state directory is still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("a file Up did not create was removed: %v", err)
	}
}
