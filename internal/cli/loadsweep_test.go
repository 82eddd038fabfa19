package cli

// Tests of load's range mode (-qps START:END[:STEP]) against meshperf's echo
// server in process on loopback port 0. Steps are short and few; the
// assertions are on the lines printed and the JSON document written, not on
// how fast anything was.

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/capacity"
	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/testutil"
	"github.com/meshperf/meshperf/pkg/loadgen/httpload"
)

// sweepJSON is the -json document of a sweep, as a reader decodes it.
type sweepJSON struct {
	Sweep capacity.Analysis
	Steps []httpload.Result
}

// stepLines are the "step N: R rps asked..." lines of a sweep's output.
func stepLines(stdout string) []string {
	var lines []string
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "step ") {
			lines = append(lines, l)
		}
	}
	return lines
}

func TestLoadSweepRunsEachStepInOrder(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	jsonPath := filepath.Join(t.TempDir(), "sweep.json")
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "100:400", "-t", "1s", "-c", "2", "-json", jsonPath,
		"http://"+addr+"/")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	lines := stepLines(stdout)
	if len(lines) != 3 {
		t.Fatalf("step lines %q; want 3 (100, 200, 400 rps doubling)\n%s", lines, stdout)
	}
	stepRE := regexp.MustCompile(`^step (\d): (\d+) rps asked, \d+ actual, p50 [\d.]+ p90 [\d.]+ p99 [\d.]+ ms, 0 errors — ok$`)
	for i, want := range []string{"100", "200", "400"} {
		m := stepRE.FindStringSubmatch(lines[i])
		if m == nil || m[1] != string(rune('1'+i)) || m[2] != want {
			t.Errorf("step line %d is %q; want step %d at %s rps, no errors, ok", i+1, lines[i], i+1, want)
		}
	}
	if !strings.Contains(stdout, "JSON result written to "+jsonPath) {
		t.Errorf("stdout does not say where the JSON went: %q", stdout)
	}

	doc := decodeJSON[sweepJSON](t, readFile(t, jsonPath))
	var asked []string
	for _, r := range doc.Steps {
		asked = append(asked, r.RequestedQPS)
		var ps []float64
		for _, p := range r.DurationHistogram.Percentiles {
			ps = append(ps, p.Percentile)
		}
		for _, p := range capacity.Percentiles {
			if !slices.Contains(ps, p) {
				t.Errorf("step at %s qps: percentiles %v lack p%v, which a sweep's steps must carry", r.RequestedQPS, ps, p)
			}
		}
		if r.RetCodes[200] == 0 || !r.CoordinatedOmissionCorrected {
			t.Errorf("step at %s qps: RetCodes %v, corrected %v; want 200s from a paced run", r.RequestedQPS, r.RetCodes, r.CoordinatedOmissionCorrected)
		}
	}
	if !slices.Equal(asked, []string{"100", "200", "400"}) {
		t.Errorf("Steps' RequestedQPS %q; want 100, 200, 400", asked)
	}
	if len(doc.Sweep.Curves) != 1 {
		t.Fatalf("Sweep has %d curves; want the target's one", len(doc.Sweep.Curves))
	}
	c := doc.Sweep.Curves[0]
	var rates []int
	for _, s := range c.Steps {
		rates = append(rates, s.RequestedRPS)
		if s.Generator.Cores < 1 || s.Generator.VCPU <= 0 {
			t.Errorf("step at %d rps: generator %+v; want its cores and the CPU it used", s.RequestedRPS, s.Generator)
		}
	}
	if c.Mode != sweepMode || !slices.Equal(rates, []int{100, 200, 400}) || len(c.Judgements) != 3 {
		t.Errorf("curve %q with steps %v and %d judgements; want %q, 100, 200, 400 and 3", c.Mode, rates, len(c.Judgements), sweepMode)
	}
}

// An objective no server can meet ends the sweep at its first step, saying so.
func TestLoadSweepObjectiveNotMetAtLowestRate(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "50:200", "-c", "1", "-t", "1s", "-slo", "p50=1us", "http://"+addr+"/")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q; want 0 (the sweep ran)", code, stderr)
	}
	lines := stepLines(stdout)
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "step 1: 50 rps asked") || !strings.Contains(lines[0], string(capacity.ObjectiveBroken)) {
		t.Fatalf("step lines %q; want only step 1 at 50 rps, its objective broken", lines)
	}
	if !strings.Contains(stdout, "cannot meet p50=1µs even at the lowest rate, 50 rps") {
		t.Errorf("stdout %q; want it to say p50=1µs cannot be met even at the lowest rate", stdout)
	}
}

// Ctrl-C ends the current step; what it measured is printed and analysed.
func TestLoadSweepInterruptedKeepsTheStep(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out, errOut syncBuffer
	code := runLoad(ctx, []string{"-quiet", "-qps", "100:400", "-t", "30s", "-json", "-", "http://" + addr + "/"}, &out, &errOut)
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, errOut.String())
	}
	lines := stepLines(errOut.String()) // with -json -, the lines go to stderr
	if len(lines) != 1 || !strings.Contains(lines[0], "interrupted") {
		t.Errorf("step lines %q; want the one step, marked interrupted", lines)
	}
	doc := decodeJSON[sweepJSON](t, out.String())
	if len(doc.Steps) != 1 || len(doc.Sweep.Curves) != 1 || doc.Sweep.Curves[0].StopReason != "interrupted" {
		t.Errorf("%d steps, curves %+v; want the interrupted step and a curve stopped by the interrupt", len(doc.Steps), doc.Sweep.Curves)
	}
	if n := doc.Steps[0].DurationHistogram.Count; n == 0 {
		t.Error("the interrupted step recorded no calls")
	}
}

// A step that cannot run fails the sweep: one line naming the step, exit 1.
func TestLoadSweepStepFailure(t *testing.T) {
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "100:400", "-t", "200ms", "http://"+testutil.ClosedPort(t)+"/")
	if code != exitFailed || stepLines(stdout) != nil {
		t.Errorf("exit %d, stdout %q; want %d and no step", code, stdout, exitFailed)
	}
	checkFailureLines(t, stderr, "step 1 at 100 rps")
	if !strings.Contains(stderr, "connection refused") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("stderr %q; want one line saying the connection was refused", stderr)
	}
}

// A target that fails every call ends the sweep at its first step too: the
// rate cannot be carried without errors, whatever the objectives.
func TestLoadSweepErrorsAtLowestRate(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	code, stdout, stderr := runLoadT(t, "-quiet", "-allow-initial-errors", "-qps", "20:80", "-t", "250ms", "http://"+addr+"/?status=503")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q; want 0 (the sweep ran)", code, stderr)
	}
	lines := stepLines(stdout)
	if len(lines) != 1 || !strings.Contains(lines[0], "errors — "+string(capacity.ErrorsSeen)) {
		t.Errorf("step lines %q; want only step 1, stopped by its errors", lines)
	}
	if !strings.Contains(stdout, "cannot meet the rate without errors even at the lowest rate, 20 rps (100% errors)") {
		t.Errorf("stdout %q; want it to say the rate cannot be carried without errors even at 20 rps", stdout)
	}
}
