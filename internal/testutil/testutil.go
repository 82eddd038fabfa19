// Package testutil holds the helpers every Go test of meshperf shares: one
// way to wait for a condition and one way to compare against a golden file.
// (What a test needs from the machine, root or a command, is testenv's.)
package testutil

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// pollInterval is how often Eventually checks: short enough that a test
// waits little past the moment its condition holds, long enough not to
// spin a core on a shared 2-vCPU machine.
const pollInterval = 5 * time.Millisecond

// Eventually polls cond until it returns nil, and fails t with cond's last
// error if timeout passes first. The timeout only guards against a hang: a
// test never asserts how long something took (that is a benchmark's job).
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll is Eventually for code that is not a test's goroutine (t.Fatal must
// not be called there): it returns cond's last error, wrapped with how long
// it waited, or nil once cond holds.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still not true after %s: %w", timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

var update = flag.Bool("update", false, "rewrite golden files with what the code produces now")

// Update reports whether the test binary runs with -update, for golden
// files that are not compared through Golden (testscript's scripts).
func Update() bool { return *update }

// Golden compares got with the file at path (relative to the test's
// package directory, conventionally under testdata/). Run the test with
// -update to write the file from got; review the diff before committing.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run the test with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what the code produces; if the change is intended, run the test with -update and review the diff\n%s",
			path, firstDifference(string(want), string(got)))
	}
}

// ProtoJSON is m as indented JSON with stable spacing, for golden files of
// generated config: protojson varies its whitespace on purpose, so its output
// is re-indented.
func ProtoJSON(t testing.TB, m proto.Message) []byte {
	t.Helper()
	compact, err := protojson.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// firstDifference shows the first line where want and got part, so that a
// failure says what changed without dumping both files.
func firstDifference(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		w, g := "(no line)", "(no line)"
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return fmt.Sprintf("line %d:\n  golden: %q\n  now:    %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}
