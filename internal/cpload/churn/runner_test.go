package churn

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// fakeClock moves only when slept on, so schedules are exact.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d > 0 {
		c.now = c.now.Add(d)
	}
	return ctx.Err()
}

// fakeMesh applies changes on the fake clock (each apply takes applyTook)
// and delivers every watched name latency after the change, to every proxy
// but those in lost.
type fakeMesh struct {
	clk       *fakeClock
	applyTook time.Duration
	latency   time.Duration
	lost      map[int]bool
	applied   []time.Time
	deleted   int
	fail      error
}

type fakeWatch struct {
	m  *fakeMesh
	at time.Time
}

func (m *fakeMesh) Apply(ctx context.Context, rs []*config.Resource) error {
	if m.fail != nil {
		return m.fail
	}
	m.applied = append(m.applied, m.clk.Now())
	return m.clk.Sleep(ctx, m.applyTook)
}

func (m *fakeMesh) Delete(ctx context.Context, rs []*config.Resource) error {
	m.deleted++
	m.applied = append(m.applied, m.clk.Now())
	return nil
}

func (m *fakeMesh) Watch(string) Arrivals { return &fakeWatch{m: m, at: m.clk.Now()} }
func (m *fakeMesh) Unwatch(Arrivals)      {}

func (m *fakeMesh) FirstAfter(i int, _ sim.Type, at time.Time) (time.Time, bool) {
	if m.lost[i] {
		return time.Time{}, false
	}
	return at.Add(m.latency), true
}

func (w *fakeWatch) Arrival(i int) (time.Time, bool) {
	if w.m.lost[i] {
		return time.Time{}, false
	}
	return w.at.Add(w.m.latency), true
}

// Wait moves the clock to the arrival, as a real wait would take that long.
func (w *fakeWatch) Wait(ctx context.Context, which []int) error {
	for _, i := range which {
		if w.m.lost[i] {
			<-ctx.Done()
			return ctx.Err()
		}
	}
	if d := w.at.Add(w.m.latency).Sub(w.m.clk.Now()); d > 0 {
		_ = w.m.clk.Sleep(ctx, d)
	}
	return nil
}

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func everyone(string) ([]int, []int) { return []int{0, 1, 2}, []int{3} }

// TestSequentialWaitsThenDelays: the performance test applies a repetition,
// waits for its delivery (30ms), then waits the delay (2.5s): repetitions
// start 2.53s apart, and each proxy's end to end is the 30ms.
func TestSequentialWaitsThenDelays(t *testing.T) {
	clk := &fakeClock{now: t0}
	m := &fakeMesh{clk: clk, latency: 30 * time.Millisecond}
	r := &Runner{Applier: m, Proxies: m, Clock: clk}
	res, err := r.Sequential(context.Background(), "perftest", PerfTest("istioinaction", 3, everyone), 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range m.applied {
		if want := t0.Add(time.Duration(i) * 2530 * time.Millisecond); !at.Equal(want) {
			t.Errorf("repetition %d applied at +%v, want +%v", i, at.Sub(t0), want.Sub(t0))
		}
	}
	if len(res.Changes) != 3 || res.Expected != 12 || res.Missed != 0 {
		t.Fatalf("%d changes, %d expected deliveries, %d missed; want 3, 12 (3 sidecars + 1 gateway each), 0", len(res.Changes), res.Expected, res.Missed)
	}
	if res.EndToEnd.N != 12 || res.EndToEnd.P99 != 30*time.Millisecond || res.PerChange.Max != 30*time.Millisecond {
		t.Errorf("end to end %+v, per change %+v; want 12 × 30ms", res.EndToEnd, res.PerChange)
	}
	if got := res.End.Sub(res.Start); got != 2*2530*time.Millisecond+30*time.Millisecond {
		t.Errorf("run took %v", got)
	}
}

// TestPacedKeepsSchedule: at 10 changes per second the changes are applied
// at 0, 100ms, 200ms... even though each apply takes 40ms, and one that takes
// longer than the period makes the next late (Lag) without shifting the rest.
func TestPacedKeepsSchedule(t *testing.T) {
	clk := &fakeClock{now: t0}
	m := &fakeMesh{clk: clk, latency: 150 * time.Millisecond, applyTook: 40 * time.Millisecond}
	r := &Runner{Applier: m, Proxies: m, Clock: clk}
	res, err := r.Paced(context.Background(), "config", ConfigChurn("ns-0", 5, everyone), 10)
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range m.applied {
		if want := t0.Add(time.Duration(i) * 100 * time.Millisecond); !at.Equal(want) {
			t.Errorf("change %d applied at +%v, want +%v", i, at.Sub(t0), want.Sub(t0))
		}
	}
	if res.EndToEnd.N != 15 || res.EndToEnd.Max != 150*time.Millisecond {
		t.Errorf("end to end %+v, want 15 deliveries of 150ms (3 sidecars, 5 changes)", res.EndToEnd)
	}

	clk = &fakeClock{now: t0}
	m = &fakeMesh{clk: clk, latency: time.Millisecond, applyTook: 250 * time.Millisecond}
	r = &Runner{Applier: m, Proxies: m, Clock: clk}
	res, err = r.Paced(context.Background(), "config", ConfigChurn("ns-0", 3, everyone), 10)
	if err != nil {
		t.Fatal(err)
	}
	if lags := []time.Duration{res.Changes[0].Lag, res.Changes[1].Lag, res.Changes[2].Lag}; lags[0] != 0 ||
		lags[1] != 150*time.Millisecond || lags[2] != 300*time.Millisecond {
		t.Errorf("lags %v, want 0, 150ms, 300ms", lags)
	}
}

// TestMissedDeliveriesAreCounted: a proxy that never gets the change makes
// the wait end at the timeout and shows as missed, not as a latency.
func TestMissedDeliveriesAreCounted(t *testing.T) {
	clk := &fakeClock{now: t0}
	m := &fakeMesh{clk: clk, latency: 10 * time.Millisecond, lost: map[int]bool{2: true}}
	r := &Runner{Applier: m, Proxies: m, Clock: clk, Timeout: 50 * time.Millisecond}
	res, err := r.Sequential(context.Background(), "perftest", PerfTest("istioinaction", 2, everyone), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Missed != 2 || res.EndToEnd.N != 6 || res.PerChange.N != 0 {
		t.Errorf("missed %d, end to end n %d, complete changes %d; want 2, 6, 0", res.Missed, res.EndToEnd.N, res.PerChange.N)
	}
}

func TestEndpointChurnAddsThenDeletes(t *testing.T) {
	clk := &fakeClock{now: t0}
	m := &fakeMesh{clk: clk, latency: 20 * time.Millisecond}
	r := &Runner{Applier: m, Proxies: m, Clock: clk}
	changes := EndpointChurn("ns-0", "svc-0", 4, everyone)
	if changes[0].Apply == nil || changes[1].Delete == nil || changes[1].Delete[0].Meta.Name != changes[0].Apply[0].Meta.Name {
		t.Fatalf("changes %+v: want add then delete of the same WorkloadEntry", changes[:2])
	}
	res, err := r.Paced(context.Background(), "endpoints", changes, 20)
	if err != nil {
		t.Fatal(err)
	}
	if m.deleted != 2 || res.EndToEnd.N != 12 || res.EndToEnd.P50 != 20*time.Millisecond {
		t.Errorf("deleted %d, end to end %+v", m.deleted, res.EndToEnd)
	}
}

func TestApplyErrorStops(t *testing.T) {
	clk := &fakeClock{now: t0}
	m := &fakeMesh{clk: clk, fail: errors.New("control plane said no")}
	r := &Runner{Applier: m, Proxies: m, Clock: clk}
	if _, err := r.Sequential(context.Background(), "perftest", PerfTest("x", 2, everyone), 0); err == nil {
		t.Fatal("an apply error was swallowed")
	}
	if _, err := r.Paced(context.Background(), "config", ConfigChurn("x", 2, everyone), 0); err == nil {
		t.Fatal("a zero rate was accepted")
	}
}

// TestNobodyAffected: with a mesh-wide Sidecar importing nothing from the
// namespace and no gateway, a change has nothing to wait for.
func TestNobodyAffected(t *testing.T) {
	changes := PerfTest("istioinaction", 1, func(string) ([]int, []int) { return nil, nil })
	if len(changes[0].Expect) != 0 {
		t.Fatalf("expectations %+v for nobody", changes[0].Expect)
	}
}
