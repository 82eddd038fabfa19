package proc_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testutil"
)

// A detached process has a session of its own (a terminal's Ctrl-C does
// not reach it), and its Record stops it, from this or a later meshperf.
func TestDetachedProcessStopsThroughItsRecord(t *testing.T) {
	log := filepath.Join(t.TempDir(), "out.log")
	p := start(t, proc.Spec{Name: "sleeper", Path: "sh", Args: []string{"-c", "echo started; exec sleep 30"}, LogPath: log, Detached: true})
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(log)
		if !strings.Contains(string(b), "started") {
			return os.ErrNotExist
		}
		return nil
	})
	sid, err := unix.Getsid(p.PID())
	if err != nil || sid != p.PID() {
		t.Errorf("session %d, %v; want its own, %d", sid, err, p.PID())
	}
	r, err := p.Record()
	if err != nil {
		t.Fatal(err)
	}
	if !r.Alive() || r.Name != "sleeper" || r.PID != p.PID() || r.StartTicks == 0 {
		t.Fatalf("record %+v, alive %v", r, r.Alive())
	}
	// The same pid with another start time is another process: left alone.
	other := r
	other.StartTicks++
	if other.Alive() {
		t.Error("a record with another start time is alive")
	}
	if err := other.Stop(time.Second); err != nil || p.Exited() {
		t.Fatalf("stopping another process's record: %v, exited %v", err, p.Exited())
	}
	if err := r.Stop(time.Second); err != nil {
		t.Fatal(err)
	}
	if r.Alive() {
		t.Error("alive after Stop")
	}
	if err := p.Wait(); err == nil || signalOf(t, p) != syscall.SIGTERM {
		t.Errorf("ended by %v, want SIGTERM", p.State())
	}
	if err := r.Stop(time.Second); err != nil {
		t.Errorf("stopping a stopped process: %v", err)
	}
}

func TestDetachedNeedsALogFile(t *testing.T) {
	if _, err := proc.Start(proc.Spec{Name: "x", Path: "true", Detached: true}); err == nil {
		t.Error("a detached process without a log file started")
	}
}
