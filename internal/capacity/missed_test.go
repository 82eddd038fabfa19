package capacity

import (
	"testing"
	"time"
)

func TestLowestRateMissed(t *testing.T) {
	objs := Objectives{{Percentile: 99, Limit: 5 * time.Millisecond}}
	slow := Step{RequestedRPS: 500, ActualRPS: 500, Latency: []PercentileMS{{Percentile: 99, MS: 7.2}}}
	if got, want := LowestRateMissed(objs, slow, Judge(slow, objs)), "cannot meet p99=5ms even at the lowest rate, 500 rps (p99 7.2 ms > 5ms)"; got != want {
		t.Errorf("objective missed: %q, want %q", got, want)
	}
	failing := Step{RequestedRPS: 20, ActualRPS: 20, ErrorPercent: 100}
	if got, want := LowestRateMissed(nil, failing, Judge(failing, nil)), "cannot meet the rate without errors even at the lowest rate, 20 rps (100% errors)"; got != want {
		t.Errorf("errors without objectives: %q, want %q", got, want)
	}
}
