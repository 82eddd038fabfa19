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
	s.Host.KubeletFiles = map[string]bool{}
	for _, f := range kubeletFiles(kubeletDevicePlugins) {
		s.Host.KubeletFiles[f] = true // and a running kubelet's files
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

// Down removes the kubelet's device-plugin files and directory only where
// they were not there at Up: a checkpoint an earlier kubelet left, and the
// directory holding it, stay.
func TestRemoveKubeletFilesRemovesOnlyWhatUpDidNotFind(t *testing.T) {
	for _, tc := range []struct {
		name     string
		before   []int // indexes into kubeletFiles present at Up
		wantLeft []int
	}{
		{"all new", nil, nil},
		{"an old checkpoint", []int{0, 2}, []int{0, 2}},
		{"an old directory", []int{0}, []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "device-plugins")
			paths := kubeletFiles(dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			had := map[string]bool{}
			for _, i := range tc.before {
				had[paths[i]] = true
			}
			// Then the cluster's kubelet makes its socket and checkpoint.
			for _, f := range paths[1:] {
				if err := os.WriteFile(f, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := removeKubeletFiles(dir, had); err != nil {
				t.Fatal(err)
			}
			left := existing(paths)
			for i, p := range paths {
				want := slices.Contains(tc.wantLeft, i)
				if left[p] != want {
					t.Errorf("%s exists: %v, want %v", p, left[p], want)
				}
			}
		})
	}
}
