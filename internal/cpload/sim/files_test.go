package sim

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// CheckFiles passes a fleet whose connections fit beside what is open and
// the margin, and refuses one more, naming the smallest -proxies-per-conn
// that fits.
func TestCheckFiles(t *testing.T) {
	b := FileBudget{Limit: 20_000, Open: 10}
	free := 20_000 - 10 - FileMargin
	if b.Free() != free {
		t.Fatalf("free %d; want %d", b.Free(), free)
	}
	if err := CheckFiles(b, free, 1, "this process", SplitFleet); err != nil {
		t.Errorf("%d proxies on %d free files: %v", free, free, err)
	}
	err := CheckFiles(b, 20_000, 1, "this process", SplitFleet)
	if !errors.Is(err, ErrTooFewFiles) {
		t.Fatalf("20000 proxies on %d free files: %v; want ErrTooFewFiles", free, err)
	}
	for _, want := range []string{"20000 simulated proxies need 20000 connections", "this process can open only 19926 more",
		"open-files limit 20000, 10 open", "-proxies-per-conn 2 or more", "several cpload processes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%q is more than one line", err)
	}
	// 2 per connection fits: 10000 connections.
	if err := CheckFiles(b, 20_000, 2, "this process", SplitFleet); err != nil {
		t.Errorf("20000 proxies 2 per connection: %v", err)
	}
	// Nothing left: sharing connections cannot help.
	err = CheckFiles(FileBudget{Limit: 50, Open: 10}, 3, 1, "this process", SplitFleet)
	if !errors.Is(err, ErrTooFewFiles) || strings.Contains(err.Error(), "-proxies-per-conn") {
		t.Errorf("no free files: %v; want only several processes suggested", err)
	}
}

// The smallest K CheckFiles names fits, and K-1 does not.
func TestCheckFilesSuggestsSmallestFit(t *testing.T) {
	b := FileBudget{Limit: 1000, Open: 36} // 900 free
	suggestion := regexp.MustCompile(`-proxies-per-conn (\d+) or more`)
	for _, proxies := range []int{901, 1800, 1801, 20_000} {
		err := CheckFiles(b, proxies, 1, "x", "")
		m := suggestion.FindStringSubmatch(fmt.Sprint(err))
		if m == nil {
			t.Fatalf("%d proxies on 900 free files: %v; want a -proxies-per-conn suggestion", proxies, err)
		}
		k, _ := strconv.Atoi(m[1])
		if CheckFiles(b, proxies, k, "x", "") != nil || CheckFiles(b, proxies, k-1, "x", "") == nil {
			t.Errorf("%d proxies on 900 free files: suggested %d per connection, not the smallest that fits", proxies, k)
		}
	}
}

// Start refuses, before connecting anything, a fleet this process has not
// the open files for; the soft limit is lowered for the test.
func TestStartChecksOpenFiles(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip(err)
	}
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Skip("no /proc: the check is skipped there")
	}
	own, err := OwnFiles()
	if err != nil {
		t.Fatal(err)
	}
	low := lim
	low.Cur = uint64(own.Open + FileMargin + 10) // room for 10 connections
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })

	f, err := NewFleet(specs(40), Options{Target: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	err = f.Start(t.Context())
	if !errors.Is(err, ErrTooFewFiles) || !strings.Contains(err.Error(), "40 simulated proxies need 40 connections") ||
		!strings.Contains(err.Error(), "-proxies-per-conn ") {
		t.Fatalf("Start: %v; want the open-files refusal suggesting -proxies-per-conn", err)
	}
	if len(f.conns) != 0 {
		t.Errorf("%d connections made before the refusal", len(f.conns))
	}
	f.Stop()
}
