package pod

import (
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/testenv"
)

// Raising the ARP thresholds for many pods, and putting them back.
func TestFitNeighbourTable(t *testing.T) {
	testenv.NeedNetns(t)
	path := filepath.Join(neighDir, "gc_thresh3")
	before, err := readInt(path)
	if err != nil {
		t.Fatal(err)
	}
	restore, raised, err := FitNeighbourTable(before / 2)
	if err != nil || raised {
		t.Fatalf("half the threshold: raised %v, %v", raised, err)
	}
	_ = restore()
	want := before + 1000
	restore, raised, err = FitNeighbourTable(want)
	if err != nil || !raised {
		t.Fatalf("above the threshold: raised %v, %v", raised, err)
	}
	if got, _ := readInt(path); got < want {
		t.Errorf("gc_thresh3 %d after raising it for %d entries", got, want)
	}
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if got, _ := readInt(path); got != before {
		t.Errorf("gc_thresh3 %d after restoring, want %d", got, before)
	}
}
