package cli

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/pkg/loadgen/httpload"
)

// Command lines that are wrong must be refused before anything runs: exit 2,
// one line on stderr saying what is wrong, and nothing on stdout.
func TestLoadBadInput(t *testing.T) {
	const url = "http://127.0.0.1:1/"
	for _, tc := range []struct {
		name string
		args []string
		want string // part of the message
	}{
		{"unknown flag", []string{"-nosuchflag", url}, "nosuchflag"},
		{"malformed URL", []string{"http://[::1"}, "http://[::1"},
		{"unsupported scheme", []string{"ftp://x"}, "ftp://x"},
		{"negative rate", []string{"-qps", "-5", url}, "-qps"},
		{"no connections", []string{"-c", "0", url}, "-c"},
		{"missing payload file", []string{"-payload-file", "/no/such/file", url}, "/no/such/file"},
		{"bad percentile", []string{"-p", "50,abc", url}, "abc"},
		{"no target", nil, "TARGET"},
		{"two targets", []string{url, url}, "TARGET"},
		{"header without value", []string{"-H", "novalue", url}, "novalue"},
		{"ping without grpc", []string{"-ping", "127.0.0.1:1"}, "-grpc"},
		{"cert without key", []string{"-cert", "/tmp/cert.pem", "https://127.0.0.1:1/"}, "-key"},
		{"mesh version without name", []string{"-mesh-version", "1.24.0", url}, "-mesh-version needs -mesh-name"},
		{"provenance not JSON", []string{"-provenance", "{meshperf", url}, "-provenance: not a provenance JSON object"},
		{"provenance unknown field", []string{"-provenance", `{"mesh":"istio"}`, url}, `unknown field "mesh"`},
		{"provenance and mesh name", []string{"-provenance", "{}", "-mesh-name", "istio", url}, "without -mesh-name"},
		{"unparseable objective", []string{"-qps", "100:400", "-slo", "p99=fast", url}, "-slo"},
		{"objective at no percentile", []string{"-qps", "100:400", "-slo", "5ms", url}, "-slo"},
		{"range start above end", []string{"-qps", "400:100", url}, "-qps"},
		{"range step 0", []string{"-qps", "100:400:0", url}, "-qps"},
		{"range from max rate", []string{"-qps", "0:400", url}, "-qps"},
		{"range from -1", []string{"-qps", "-1:400", url}, "-qps"},
		{"range with exact count", []string{"-qps", "100:400", "-n", "10", url}, "-n"},
		{"range until interrupted", []string{"-qps", "100:400", "-t", "0", url}, "-t 0"},
		{"objective without range", []string{"-slo", "p99=5ms", url}, "-slo needs a -qps range"},
		{"refine without range", []string{"-refine", "1", url}, "-refine needs a -qps range"},
		{"refine above 5", []string{"-qps", "100:400", "-refine", "6", url}, "-refine"},
		{"refine negative", []string{"-qps", "100:400", "-refine", "-1", url}, "-refine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runLoadT(t, append([]string{"-quiet"}, tc.args...)...)
			if code != exitBadInput || stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitBadInput)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasSuffix(stderr, "\n") || !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr %q; want one line mentioning %q", stderr, tc.want)
			}
		})
	}
}

// checkFailureLines checks that a failed run said why on its first line, and
// that everything it wrote to stderr is meshperf's own (no stray logging).
// Whether it is one line in all is TestLoadRunFailureIsOneLine's concern.
func checkFailureLines(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if !strings.Contains(lines[0], want) {
		t.Errorf("stderr %q; want the first line to mention %q", stderr, want)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "meshperf load: ") {
			t.Errorf("stderr line %q is not meshperf's", l)
		}
	}
}

// A failed run is one line saying what was wrong and what to do (the hint once
// came on a second line).
func TestLoadRunFailureIsOneLine(t *testing.T) {
	code, _, stderr := runLoadT(t, "-quiet", "-qps", "100", "-t", "200ms", "http://"+testutil.ClosedPort(t)+"/")
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if code != exitFailed || len(lines) != 1 || !strings.Contains(lines[0], "connection refused") ||
		!strings.Contains(lines[0], "-allow-initial-errors") {
		t.Errorf("exit %d, stderr %q; want %d and one line", code, stderr, exitFailed)
	}
}

func TestLoadUnreachableTarget(t *testing.T) {
	url := "http://" + testutil.ClosedPort(t) + "/"
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "100", "-t", "200ms", url)
	if code != exitFailed {
		t.Errorf("exit %d, want %d; stdout %q", code, exitFailed, stdout)
	}
	checkFailureLines(t, stderr, "connection refused")

	// Allowed, the failed calls are the result: socket errors, counted as -1.
	r := decodeJSON[httpload.Result](t, runJSON(t, "-allow-initial-errors", "-qps", "100", "-t", "200ms", url))
	if n := r.RetCodes[-1]; len(r.RetCodes) != 1 || n < 1 || r.ErrorsDurationHistogram.Count != n {
		t.Errorf("RetCodes %v, %d timed errors; want only socket errors (-1)", r.RetCodes, r.ErrorsDurationHistogram.Count)
	}
}

func TestLoadIgnoresFortioFlagsWithNotice(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	code, _, stderr := runLoadT(t, "-quiet", "-r", "0.0001", "-a", "-stdclient", "-n", "3", "-qps", "0", "http://"+addr+"/")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("stderr %q; want one notice per ignored flag", stderr)
	}
	for i, name := range []string{"-r ", "-a ", "-stdclient "} {
		if !strings.Contains(lines[i], name) || !strings.Contains(lines[i], "has no meaning here") {
			t.Errorf("notice %d is %q; want it to name %s and say it has no meaning here", i, lines[i], name)
		}
	}
}
