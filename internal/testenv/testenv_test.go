package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder stands in for a test so that a skip or a failure can be seen
// without ending the real test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skipf(format string, a ...any)  { r.skipped = sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = sprintf(format, a...) }
func sprintf(format string, a ...any) string       { return fmt.Sprintf(format, a...) }

func TestMissingSkipsWithWhatAndHow(t *testing.T) {
	t.Setenv(RequireAllEnv, "")
	r := &recorder{TB: t}
	NeedCommand(r, "meshperf-no-such-command", "meshperf-pkg")
	if r.failed != "" {
		t.Fatalf("failed (%q) where it should skip", r.failed)
	}
	want := "needs meshperf-pkg: meshperf-no-such-command not found; install meshperf-pkg (apt-get install meshperf-pkg)"
	if r.skipped != want {
		t.Errorf("skip message %q, want %q", r.skipped, want)
	}
}

func TestRequireAllTurnsSkipsIntoFailures(t *testing.T) {
	t.Setenv(RequireAllEnv, "1")
	r := &recorder{TB: t}
	Missing(r, "a thing", "make one")
	if r.skipped != "" || !strings.HasPrefix(r.failed, "needs a thing: make one") || !strings.Contains(r.failed, RequireAllEnv) {
		t.Errorf("skipped %q, failed %q; want a failure naming the thing and %s", r.skipped, r.failed, RequireAllEnv)
	}
}

func TestPresentCommandIsFound(t *testing.T) {
	r := &recorder{TB: t}
	if p := NeedCommand(r, "sh", "dash"); p == "" || r.skipped != "" || r.failed != "" {
		t.Errorf("sh: path %q, skipped %q, failed %q", p, r.skipped, r.failed)
	}
}
