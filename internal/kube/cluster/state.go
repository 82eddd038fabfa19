package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/proc"
)

// state is the state file: everything Down needs, written by Up before
// each change so that Down works after a crash at any point.
type state struct {
	StateDir string `json:"state_dir"`
	// Created are the directories Up created for the state directory
	// (itself and any missing parent), outermost first.
	Created []string `json:"created"`
	// Host is the host as it was before Up changed it.
	Host HostState `json:"host"`
	// Network says what Up added to the host's network.
	Network networkChanges `json:"network"`
	// Cgroups are the cluster's cgroups (CgroupName) Up created.
	Cgroups   []string      `json:"cgroups"`
	Processes []proc.Record `json:"processes"`
	Started   time.Time     `json:"started"`
	// Complete is set once Up has seen the node Ready and CoreDNS answer.
	Complete bool `json:"complete"`
}

// networkChanges are the host network changes Up made.
type networkChanges struct {
	NodeAddress bool `json:"node_address"` // NodeIP/32 on lo
	Blackhole   bool `json:"blackhole"`    // the whole Range
	Bridge      bool `json:"bridge"`       // Bridge, its gateway address and the Service route
}

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(layout{s.StateDir}.stateFile(), b, 0o600)
}

// loadState reads the state directory's state file; errNoCluster if there
// is none.
func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(layout{dir}.stateFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s", errNoCluster, dir)
	}
	if err != nil {
		return nil, err
	}
	var s state
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", layout{dir}.stateFile(), err)
	}
	s.StateDir = dir
	return &s, nil
}

// dead lists the recorded processes that no longer run.
func (s *state) dead() []string {
	var d []string
	for _, r := range s.Processes {
		if !r.Alive() {
			d = append(d, fmt.Sprintf("%s (pid %d)", r.Name, r.PID))
		}
	}
	return d
}

// makeStateDir creates dir and returns the directories that did not
// exist, outermost first. An existing dir must be empty: Down removes
// what Up put there, and a name of the user's could be among them.
func makeStateDir(dir string) ([]string, error) {
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append([]string{d}, created...)
		if d == filepath.Dir(d) {
			break
		}
	}
	return created, os.MkdirAll(dir, 0o755)
}

// checkEmpty refuses a state directory that has anything in it.
func checkEmpty(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("state directory %s exists and is not empty; give an empty or new one (--state-dir)", dir)
	}
	return nil
}

// removeCreated removes the directories makeStateDir created, innermost
// first, as far as they are empty.
func removeCreated(created []string) {
	for i := len(created) - 1; i >= 0; i-- {
		if err := os.Remove(created[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return
		}
	}
}

// lockStateDir takes the state directory's lock (flock on the directory
// itself, which the kernel drops when the process ends, however it ends),
// so that one up or down at a time works on a cluster; a second one is
// refused at once rather than racing the first. unlock releases it.
func lockStateDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another `meshperf cluster up` or `down` is working on %s; wait for it to end", dir)
		}
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}
