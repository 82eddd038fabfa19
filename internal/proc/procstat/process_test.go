package procstat

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// helperEnv makes the test binary a child whose cost the tests measure.
const helperEnv = "MESHPERF_PROCSTAT_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "burn":
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
		}
		os.Exit(0)
	case "alloc":
		// Wait for a line, allocate and touch 50 MB, say so, and hold it.
		r := bufio.NewReader(os.Stdin)
		r.ReadString('\n')
		buf := make([]byte, 50<<20)
		for i := 0; i < len(buf); i += 4096 { // one write a page makes it resident
			buf[i] = 1
		}
		fmt.Println("allocated")
		r.ReadString('\n')
		fmt.Println(len(buf)) // keeps buf alive until here
		os.Exit(0)
	}
	os.Exit(2)
}

// startHelper starts the test binary in mode; it is killed when the test
// ends.
func startHelper(t *testing.T, mode string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), helperEnv+"="+mode)
	in, err := c.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c, in, bufio.NewReader(out)
}

func startSleep(t *testing.T) *exec.Cmd {
	t.Helper()
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Process.Kill()
		c.Wait()
	})
	return c
}

func TestSamplerBusyIdleAndGone(t *testing.T) {
	burner, _, _ := startHelper(t, "burn")
	idle := startSleep(t)
	s := NewSampler(100 * time.Millisecond)
	if err := s.Add("burner", burner.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("idle", idle.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if err := s.Add("idle", idle.Process.Pid); err == nil {
		t.Error("Add accepted a duplicate name")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runDone := make(chan struct{})
	go func() { s.Run(ctx); close(runDone) }()

	start := s.SampleNow()
	// The window's length is what is measured over (vCPU = CPU time / wall
	// time), so this wait is the test's subject, not a guess at readiness.
	time.Sleep(500 * time.Millisecond)
	end := s.SampleNow()
	byName := map[string]ProcessUsage{}
	for _, u := range s.Window(start, end) {
		byName[u.Name] = u
	}
	b, i := byName["burner"], byName["idle"]
	// The burner gets a full core only on an idle machine; on a busy one
	// (CI, builds beside it) it gets a share, still far above the idle one.
	if b.Err != nil || b.Samples < 2 || b.VCPU <= 0.1 {
		t.Errorf("burner: %+v; want vCPU > 0.1", b)
	}
	if i.Err != nil || i.VCPU >= 0.05 || i.VCPU*5 >= b.VCPU {
		t.Errorf("idle: %+v; want vCPU < 0.05 and under a fifth of the burner's %.3f", i, b.VCPU)
	}
	if b.MeanRSS == 0 || b.MaxRSS < b.MeanRSS || b.MaxHWM < b.MaxRSS || !b.PSSKnown || b.MaxPSS == 0 {
		t.Errorf("burner memory figures inconsistent: %+v", b)
	}

	// A process that exits is reported as gone, with its figures kept.
	burner.Process.Kill()
	burner.Wait()
	after := s.SampleNow()
	var got ProcessUsage
	for _, u := range s.Window(start, after.Add(time.Second)) {
		if u.Name == "burner" {
			got = u
		}
	}
	if !got.Gone || got.GoneAt.Before(end) || got.VCPU <= 0.1 {
		t.Errorf("after exit, burner = %+v; want gone after %v with its vCPU kept", got, end)
	}
	if _, err := Read(burner.Process.Pid); !errors.Is(err, ErrGone) {
		t.Errorf("Read of an exited pid: %v, want ErrGone", err)
	}
	cancel()
	<-runDone
	if u := s.Window(after.Add(time.Hour), after.Add(2*time.Hour)); u[0].Err == nil || u[0].Samples != 0 {
		t.Errorf("empty window: %+v; want an error", u[0])
	}
}

func TestRSSGrowsWithAllocation(t *testing.T) {
	c, in, out := startHelper(t, "alloc")
	before, err := Read(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(in, "go\n")
	if line, err := out.ReadString('\n'); err != nil || line != "allocated\n" {
		t.Fatalf("helper said %q, %v", line, err)
	}
	after, err := Read(c.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	u, err := Between(before, after)
	if err != nil {
		t.Fatal(err)
	}
	const min = 40 << 20
	if after.RSS < before.RSS+min {
		t.Errorf("RSS %d -> %d bytes; want growth of at least %d", before.RSS, after.RSS, min)
	}
	if !after.PSSKnown || after.PSS < before.PSS+min {
		t.Errorf("PSS %d -> %d (known %v); want growth of at least %d", before.PSS, after.PSS, after.PSSKnown, min)
	}
	if u.MaxHWM < after.RSS || u.CPU <= 0 {
		t.Errorf("usage %+v: HWM below RSS or no CPU for touching 50 MB", u)
	}
	if after.Name == "" || after.StartTicks == 0 {
		t.Errorf("sample lacks identity: %+v", after)
	}
}

// TestSwitchesCountEveryThread reads this test process, whose goroutines
// sleep and wake on several threads: every sleep is a voluntary switch of
// some thread, and the process's own status line (its main thread) would
// miss most of them.
func TestSwitchesCountEveryThread(t *testing.T) {
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !before.SwitchesKnown || before.UserCPU+before.SystemCPU != before.CPU {
		t.Fatalf("Read = %+v; want switches known and user + system = CPU", before)
	}
	const naps = 50
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range naps {
				time.Sleep(time.Millisecond)
			}
		}()
	}
	wg.Wait()
	after, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	u, err := Between(before, after)
	if err != nil {
		t.Fatal(err)
	}
	// The Go runtime may batch timers of several goroutines into one wake-up,
	// but not fifty sleeps in a row into fewer than ten.
	if !u.SwitchesKnown || u.VoluntarySwitches < naps/5 {
		t.Errorf("after %d naps on 4 goroutines: %+v; want at least %d voluntary switches", naps, u, naps/5)
	}
}
