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

// PostgreSQL's server commands live in a directory per major version, off
// PATH; the newest version that has the command wins.
func TestFindInPostgresVersionDirs(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"9", "15", "16"} {
		dir := filepath.Join(root, v, "bin")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if v != "16" {
			if err := os.WriteFile(filepath.Join(dir, "meshperf-pg-probe"), []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := postgresBinGlob
	postgresBinGlob = filepath.Join(root, "*", "bin")
	t.Cleanup(func() { postgresBinGlob = old })
	t.Setenv("PATH", t.TempDir())
	got, err := Find("meshperf-pg-probe", "postgresql")
	if want := filepath.Join(root, "15", "bin", "meshperf-pg-probe"); err != nil || got != want {
		t.Fatalf("Find = %q, %v; want %q (15 is the newest version that has it)", got, err, want)
	}
}
