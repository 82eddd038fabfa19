package pod

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// neighDir holds the kernel's ARP table thresholds. The table is one for
// the whole machine, every network namespace's entries counted in it, and
// the thresholds are set only from the host's namespace.
const neighDir = "/proc/sys/net/ipv4/neigh/default"

// NeighbourEntries is how many ARP entries pods on one bridge can need at
// once: each pod may hold one for every other pod and the bridge, and the
// host one for every pod.
func NeighbourEntries(pods int) int { return (pods + 1) * (pods + 1) }

// FitNeighbourTable raises the kernel's ARP table thresholds when entries
// would not fit under them, as Kubernetes nodes running many pods do: past
// gc_thresh3 (1024 by default) the kernel refuses new entries ("neighbor
// table overflow"), packets to a pod whose entry is missing are dropped,
// and connections wait out SYN retransmissions of one to several seconds.
// It returns what puts the old values back (nothing to do when none were
// raised) and whether it raised them.
func FitNeighbourTable(entries int) (restore func() error, raised bool, err error) {
	noop := func() error { return nil }
	old := map[string]int{}
	for _, k := range []string{"gc_thresh2", "gc_thresh3"} {
		v, err := readInt(filepath.Join(neighDir, k))
		if err != nil {
			return noop, false, err
		}
		old[k] = v
	}
	if old["gc_thresh3"] >= entries {
		return noop, false, nil
	}
	want := map[string]int{"gc_thresh2": max(old["gc_thresh2"], entries), "gc_thresh3": 2 * entries}
	// gc_thresh3 first: the kernel does not check the order, but a soft
	// limit above the hard one would be a state nobody meant.
	for _, k := range []string{"gc_thresh3", "gc_thresh2"} {
		if err := writeInt(filepath.Join(neighDir, k), want[k]); err != nil {
			return noop, false, err
		}
	}
	return func() error {
		return errors.Join(writeInt(filepath.Join(neighDir, "gc_thresh2"), old["gc_thresh2"]),
			writeInt(filepath.Join(neighDir, "gc_thresh3"), old["gc_thresh3"]))
	}, true, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("ARP table size: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("ARP table size: %s: %w", path, err)
	}
	return v, nil
}

func writeInt(path string, v int) error {
	if err := os.WriteFile(path, []byte(strconv.Itoa(v)), 0o644); err != nil {
		return fmt.Errorf("ARP table size: %w", err)
	}
	return nil
}
