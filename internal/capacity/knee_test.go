package capacity

import (
	"math"
	"strings"
	"testing"
)

func TestKneedle(t *testing.T) {
	points := func(ms ...float64) []kneePoint {
		var pts []kneePoint
		for i, v := range ms {
			pts = append(pts, kneePoint{float64(1000 * (i + 1)), v})
		}
		return pts
	}
	tests := []struct {
		name   string
		points []kneePoint
		rps    float64 // 0: no knee
		why    string
	}{
		// Flat to 6000 rps, then the queue builds.
		{"hockey stick", points(1, 1.05, 1.1, 1.15, 1.2, 1.3, 3, 10), 6000, ""},
		{"hockey stick out of order", []kneePoint{{8000, 10}, {1000, 1}, {6000, 1.3}, {7000, 3}, {3000, 1.1}}, 6000, ""},
		{"straight line", points(1, 2, 3, 4, 5, 6, 7, 8), 0, "the curve does not bend within the measured range (p99 1 → 8 ms)"},
		{"barely rises", points(0.31, 0.32, 0.33, 0.35, 0.38), 0, "the curve does not bend within the measured range (p99 0.31 → 0.38 ms)"},
		{"three points", points(1, 1.1, 10), 0, "fewer than 4 usable steps"},
		{"one rate", []kneePoint{{1000, 1}, {1000, 2}, {1000, 3}, {1000, 4}}, 0, "the curve does not bend"},
		{"concave", points(1, 5, 7, 8, 8.5), 0, "the curve does not bend"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := kneedle(99, tc.points)
			if k.Found != (tc.rps > 0) || k.RPS != tc.rps || !strings.HasPrefix(k.Why, tc.why) {
				t.Errorf("kneedle = %+v; want knee at %v, why %q", k, tc.rps, tc.why)
			}
		})
	}
}

func TestFindKneesSkipsUnusableSteps(t *testing.T) {
	var steps []Step
	for i, p99 := range []float64{1, 1.05, 1.1, 1.2, 4, 12} {
		steps = append(steps, step(1000*(i+1), 0.5, 0.8, p99))
	}
	judgements := make([]Judgement, len(steps))
	for i := range judgements {
		judgements[i] = Judgement{Verdict: WithinObjectives}
	}
	knees := findKnees(steps, judgements)
	if len(knees) != len(CurvePercentiles) || !knees[2].Found || knees[2].RPS != 4000 {
		t.Fatalf("knees %+v; want p99's at 4000 rps", knees)
	}
	// Without the two top steps (generator-bound, failed) the curve is flat.
	judgements[4].Verdict, judgements[5].Verdict = GeneratorBound, RunFailed
	steps[3].ActualRPS = math.NaN()
	knees = findKnees(steps, judgements)
	if knees[2].Found || knees[2].Why != "fewer than 4 usable steps" {
		t.Errorf("knee %+v; want none from 3 usable steps", knees[2])
	}
}
