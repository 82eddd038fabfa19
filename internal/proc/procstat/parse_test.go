package procstat

import (
	"encoding/binary"
	"testing"
	"time"
)

// A real /proc/PID/stat line with a command name full of traps.
const oddStat = "4242 (we ird) (x) ) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 3 0 98765 1000000 500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

func TestParseStat(t *testing.T) {
	f, err := ParseStat([]byte(oddStat))
	if err != nil {
		t.Fatal(err)
	}
	want := StatFields{Name: "we ird) (x) ", State: 'S', UserTicks: 250, SystemTicks: 75, StartTicks: 98765}
	if f != want {
		t.Errorf("ParseStat = %+v, want %+v", f, want)
	}
	for _, bad := range []string{
		"",
		"1 noparens S 1",
		"1 (short) S 1 2 3",
		"1 (x) SS 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 3 0 98765 1",
		"1 (x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 -5 75 0 0 20 0 3 0 98765 1",
		") 1 (x S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 3 0 98765 1",
	} {
		if _, err := ParseStat([]byte(bad)); err == nil {
			t.Errorf("ParseStat(%q) accepted it", bad)
		}
	}
}

const statusText = `Name:	meshperf-proxy
Umask:	0022
State:	S (sleeping)
Uid:	1337	1337	1337	1337
VmPeak:	  123456 kB
VmHWM:	   20480 kB
VmRSS:	   10240 kB
RssAnon:	    8000 kB
Threads:	3
voluntary_ctxt_switches:	1234
nonvoluntary_ctxt_switches:	56
`

func TestParseStatus(t *testing.T) {
	m, err := ParseStatus([]byte(statusText))
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS != 10240*1024 || m.HWM != 20480*1024 || m.VoluntarySwitches != 1234 || m.InvoluntarySwitches != 56 {
		t.Errorf("ParseStatus = %+v", m)
	}
	// Kernel threads have no Vm lines.
	if m, err := ParseStatus([]byte("Name:\tkthreadd\nState:\tS (sleeping)\n")); err != nil || m != (StatusMemory{}) {
		t.Errorf("kernel thread status = %+v, %v", m, err)
	}
	for _, bad := range []string{"VmRSS:\t12 MB\n", "VmRSS:\tlots kB\n", "VmHWM:\t99999999999999999999 kB\n",
		"voluntary_ctxt_switches:\tmany\n", "nonvoluntary_ctxt_switches:\t-1\n"} {
		if _, err := ParseStatus([]byte(bad)); err == nil {
			t.Errorf("ParseStatus(%q) accepted it", bad)
		}
	}
}

const rollupText = `55d0c0a8e000-7ffd3c5fe000 ---p 00000000 00:00 0                          [rollup]
Rss:               10240 kB
Pss:                6144 kB
Pss_Dirty:          4000 kB
Pss_Anon:           4000 kB
Shared_Clean:       4096 kB
`

func TestParseSmapsRollup(t *testing.T) {
	pss, ok, err := ParseSmapsRollup([]byte(rollupText))
	if err != nil || !ok || pss != 6144*1024 {
		t.Errorf("ParseSmapsRollup = %d, %v, %v; want %d", pss, ok, err, 6144*1024)
	}
	if _, ok, err := ParseSmapsRollup([]byte("Rss: 1 kB\n")); ok || err != nil {
		t.Errorf("rollup without Pss: ok=%v err=%v", ok, err)
	}
	if _, _, err := ParseSmapsRollup([]byte("Pss: x kB\n")); err == nil {
		t.Error("bad Pss accepted")
	}
}

func TestClockTicks(t *testing.T) {
	var auxv []byte
	for _, kv := range [][2]uint64{{6, 4096}, {17, 250}, {0, 0}, {17, 999}} {
		auxv = binary.NativeEndian.AppendUint64(auxv, kv[0])
		auxv = binary.NativeEndian.AppendUint64(auxv, kv[1])
	}
	if v, ok := clockTicksFromAuxv(auxv); !ok || v != 250 {
		t.Errorf("clockTicksFromAuxv = %d, %v; want 250 (entries after AT_NULL ignored)", v, ok)
	}
	if _, ok := clockTicksFromAuxv(auxv[:20]); ok {
		t.Error("found AT_CLKTCK in a truncated vector")
	}
	// Linux's USER_HZ is 100 on every architecture this runs on.
	if got := ClockTicks(); got != 100 {
		t.Errorf("ClockTicks() = %d, want 100", got)
	}
	if d := ticksToDuration(250, 100); d != 2500*time.Millisecond {
		t.Errorf("250 ticks = %v", d)
	}
}

func TestBetween(t *testing.T) {
	t0 := time.Now()
	a := Sample{PID: 7, StartTicks: 9, CPU: time.Second, HWM: 50, At: t0}
	b := Sample{PID: 7, StartTicks: 9, CPU: 1500 * time.Millisecond, RSS: 30, HWM: 40, PSS: 20, PSSKnown: true, At: t0.Add(2 * time.Second)}
	u, err := Between(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if u.VCPU != 0.25 || u.RSS != 30 || u.PSS != 20 || !u.PSSKnown || u.MaxHWM != 50 || u.Wall != 2*time.Second {
		t.Errorf("Between = %+v", u)
	}
	if u.SwitchesKnown {
		t.Errorf("Between = %+v; switches known though neither sample had them", u)
	}
	a.UserCPU, a.SystemCPU = 600*time.Millisecond, 400*time.Millisecond
	b.UserCPU, b.SystemCPU = 800*time.Millisecond, 700*time.Millisecond
	a.VoluntarySwitches, a.InvoluntarySwitches, a.SwitchesKnown = 100, 10, true
	b.VoluntarySwitches, b.InvoluntarySwitches, b.SwitchesKnown = 350, 5, true
	if u, err = Between(a, b); err != nil {
		t.Fatal(err)
	}
	// A thread that exited took its counts with it (10 -> 5): zero, not a wrap-around.
	if u.UserVCPU != 0.1 || u.SystemVCPU != 0.15 || !u.SwitchesKnown || u.VoluntarySwitches != 250 || u.InvoluntarySwitches != 0 {
		t.Errorf("Between = %+v; want user 0.1, system 0.15 vCPU, 250 voluntary and 0 involuntary switches", u)
	}
	if _, err := Between(b, a); err == nil {
		t.Error("Between accepted samples in the wrong order")
	}
	c := b
	c.StartTicks = 10
	if _, err := Between(a, c); err == nil {
		t.Error("Between accepted samples of a reused pid")
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(oddStat))
	f.Add([]byte("1 (a) R"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := ParseStat(b); err == nil && !isLetter(s.State) {
			t.Errorf("parsed %q with state %q", b, s.State)
		}
	})
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusText))
	f.Add([]byte("VmRSS:"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _ = ParseStatus(b) })
}

func FuzzParseSmapsRollup(f *testing.F) {
	f.Add([]byte(rollupText))
	f.Add([]byte("Pss: 18014398509481984 kB"))
	f.Fuzz(func(t *testing.T, b []byte) { _, _, _ = ParseSmapsRollup(b) })
}
