package bench

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestLookPeer(t *testing.T) {
	haproxy := Peer{Name: "meshperf-no-such-peer", Flag: "-peer", Install: "apt-get install peer"}
	_, err := LookPeer(haproxy, "")
	var pe *PeerError
	if !errors.As(err, &pe) || err.Error() != "meshperf-no-such-peer: not found on PATH: get it with `apt-get install peer`, or give its path with -peer" {
		t.Errorf("missing from PATH: %v", err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "exe")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		filepath.Join(dir, "absent"): "no such file",
		plain:                        "not an executable file",
		dir:                          "not an executable file",
	} {
		_, err := LookPeer(haproxy, path)
		if !errors.As(err, &pe) || pe.Reason != want || !strings.HasPrefix(err.Error(), "-peer "+path+": ") {
			t.Errorf("LookPeer(%s) = %v; want %q", path, err, want)
		}
	}
	if got, err := LookPeer(haproxy, exe); err != nil || got != exe {
		t.Errorf("LookPeer(executable) = %q, %v", got, err)
	}
	if got, err := LookPeer(Peer{Name: "sh"}, ""); err != nil || !filepath.IsAbs(got) {
		t.Errorf("LookPeer(sh on PATH) = %q, %v", got, err)
	}
}

func TestSamplesAndRatio(t *testing.T) {
	ours := Samples{0.050, 0.052, math.NaN(), 0.048, 0.051}
	peer := Samples{0.044, 0.045, 0.043, 0.046, 0.044}
	if m := ours.Median(); math.Abs(m-0.0505) > 1e-12 {
		t.Errorf("median %v, want 0.0505 (NaN left out)", m)
	}
	if cv := ours.CV(); cv < 0.02 || cv > 0.05 || ours.Noisy() {
		t.Errorf("CV %v; want about 3%%, not noisy", cv)
	}
	r := NewRatio("http1 plaintext 1000qps vcpu-per-1k", ours, peer, false, 0.9)
	if r.Repeats != 4 || math.Abs(r.Value-0.0505/0.044) > 1e-12 || r.Met() || r.Noisy() {
		t.Errorf("ratio %+v", r)
	}
	if s := r.String(); s != "1.15x (goal <= 0.90x: missed)" {
		t.Errorf("String() = %q", s)
	}
	rate := NewRatio("max rps", Samples{30000, 31000}, Samples{27000, 28000}, true, 1.0)
	if !rate.Met() || !strings.Contains(rate.String(), ">= 1.00x: met") {
		t.Errorf("rate ratio %+v %s", rate, rate)
	}
	noisy := NewRatio("p99", Samples{1, 3, 1, 4}, Samples{1, 1.1, 1, 1}, false, 0)
	if !noisy.Noisy() || !strings.Contains(noisy.String(), "noisy: CV") {
		t.Errorf("noisy ratio not flagged: %s", noisy)
	}
	if none := NewRatio("x", Samples{1}, Samples{0}, false, 1); !math.IsNaN(none.Value) || none.Met() || none.String() != "n/a" {
		t.Errorf("ratio against zero: %+v", none)
	}
	if cv := (Samples{math.NaN(), 2}).CV(); !math.IsNaN(cv) {
		t.Errorf("CV of one value %v, want NaN", cv)
	}
}

func TestInterleaveRotates(t *testing.T) {
	var order []string
	err := Interleave(context.Background(), 3, []string{"a", "b", "c"}, func(_ context.Context, round int, s string) error {
		order = append(order, s)
		return nil
	})
	if want := []string{"a", "b", "c", "b", "c", "a", "c", "a", "b"}; err != nil || !reflect.DeepEqual(order, want) {
		t.Errorf("order %v, %v; want %v", order, err, want)
	}
	boom := errors.New("boom")
	n := 0
	err = Interleave(context.Background(), 3, []string{"a", "b"}, func(context.Context, int, string) error {
		n++
		if n == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || n != 2 {
		t.Errorf("Interleave went on after an error: %v after %d runs", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Interleave(ctx, 1, []string{"a"}, func(context.Context, int, string) error { t.Error("ran after cancel"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

func TestBaselineCheck(t *testing.T) {
	quiet := func(key string, v float64, higher bool) Ratio {
		return Ratio{Key: key, Ours: v, Peer: 1, Value: v, OursCV: 0.02, PeerCV: 0.02, Repeats: 5, HigherIsBetter: higher}
	}
	once := NewRatio("once", Samples{2}, Samples{4}, false, 0) // one repeat: no CV
	base := NewBaseline("proxy", []Ratio{quiet("cpu", 0.9, false), quiet("rate", 1.0, true), quiet("p99", 1.2, false),
		{Key: "unmeasured", Value: math.NaN()}, once}, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	if _, ok := base.Ratios["unmeasured"]; ok || len(base.Ratios) != 4 {
		t.Fatalf("baseline kept %v", base.Ratios)
	}
	path := filepath.Join(t.TempDir(), "proxy.baseline.json")
	if err := base.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadBaseline(path)
	if err != nil || back.Bench != "proxy" || len(back.Ratios) != 4 || back.Ratios["cpu"].Value != 0.9 ||
		back.Ratios["once"].Value != 0.5 || !math.IsNaN(back.Ratios["once"].OursCV) {
		t.Fatalf("read back %+v, %v", back, err)
	}
	regs, err := back.Check([]Ratio{
		quiet("cpu", 1.05, false), // 17% worse: a regression
		quiet("rate", 0.95, true), // 5% fewer requests: within the margin
		quiet("p99", 1.0, false),  // better
		quiet("new", 9, false),    // not in the baseline
	})
	if err != nil || len(regs) != 1 || regs[0].Key != "cpu" || !strings.Contains(regs[0].String(), "1.05x against the baseline's 0.90x (+17%") {
		t.Errorf("Check = %v, %v", regs, err)
	}
	// The same change, measured noisily, is within the noise.
	noisy := quiet("cpu", 1.05, false)
	noisy.OursCV = 0.30
	if regs, err := back.Check([]Ratio{noisy}); err != nil || len(regs) != 0 {
		t.Errorf("noisy run flagged: %v, %v", regs, err)
	}
	{
		slower := quiet("rate", 0.8, true)
		if regs, _ := back.Check([]Ratio{slower}); len(regs) != 1 {
			t.Errorf("a rate 20%% lower passed: %v", regs)
		}
	}
	if _, err := back.Check([]Ratio{quiet("new", 1, false)}); !errors.Is(err, ErrNoCommonRatios) {
		t.Errorf("a check of nothing: %v", err)
	}
	for name, text := range map[string]string{"bad.json": "{", "empty.json": `{"bench":"proxy","ratios":{}}`} {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadBaseline(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ReadBaseline(%s) = %v; want an error naming it", name, err)
		}
	}
}
