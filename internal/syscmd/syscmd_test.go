package syscmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindOnPath(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "meshperf-syscmd-probe")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	got, err := Find("meshperf-syscmd-probe", "probe")
	if err != nil || got != bin {
		t.Fatalf("Find = %q, %v; want %q", got, err, bin)
	}
}

func TestFindNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Find("meshperf-no-such-command", "meshperf-pkg")
	if err == nil || !strings.Contains(err.Error(), "apt-get install meshperf-pkg") {
		t.Fatalf("error %v does not say which package to install", err)
	}
}

// A command that is not executable does not count as found.
func TestFindSkipsNonExecutable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "meshperf-syscmd-data"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if p, err := Find("meshperf-syscmd-data", "x"); err == nil {
		t.Fatalf("found %s, a file that cannot run", p)
	}
}
