package capacity

import (
	"math"
	"reflect"
	"testing"
)

var nan = math.NaN()

// step is a measured step at rps, kept in full, without errors, with a
// p50/p90/p99 of the given milliseconds and an idle load generator.
func step(rps int, p50, p90, p99 float64) Step {
	return Step{
		RequestedRPS: rps,
		ActualRPS:    float64(rps),
		Latency:      []PercentileMS{{50, p50}, {90, p90}, {99, p99}},
		Generator:    Saturation{VCPU: 0.2, Cores: 2, SendDelayP99MS: 0.1},
		Server:       Saturation{VCPU: 0.3, Cores: 2, SendDelayP99MS: nan},
	}
}

func objectives(t *testing.T, v string) Objectives {
	t.Helper()
	var objs Objectives
	if v == "" {
		return objs
	}
	if err := objs.Set(v); err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestJudge(t *testing.T) {
	objs := objectives(t, "p99=5ms,p50=1ms")
	tests := []struct {
		name        string
		step        func(s *Step)
		verdict     Verdict
		detail      string
		broken      int
		serverBound bool
	}{
		{"within", func(s *Step) {}, WithinObjectives, "", 0, false},
		{"objective broken", func(s *Step) { s.Latency[2].MS = 6.123 },
			ObjectiveBroken, "p99 6.12 ms > 5ms", 1, false},
		{"two broken", func(s *Step) { s.Latency[2].MS = 6.123; s.Latency[0].MS = 1.5 },
			ObjectiveBroken, "p99 6.12 ms > 5ms, p50 1.5 ms > 1ms", 2, false},
		{"at the limit meets it", func(s *Step) { s.Latency[2].MS = 5 }, WithinObjectives, "", 0, false},
		{"percentile missing", func(s *Step) { s.Latency = s.Latency[:2] },
			ObjectiveBroken, "no p99 measured", 1, false},
		{"rate not kept", func(s *Step) { s.RequestedRPS, s.ActualRPS = 4000, 3712 },
			RateNotKept, "actual 3712 rps of 4000 requested (93%)", 0, false},
		{"errors before rate", func(s *Step) { s.ErrorPercent = 2.3; s.ActualRPS = 10 },
			ErrorsSeen, "2.3% errors", 0, false},
		{"generator CPU before errors", func(s *Step) { s.ErrorPercent = 5; s.Generator.VCPU = 1.94 },
			GeneratorBound, "load generator saturated: 1.94 of 2 vCPU", 0, false},
		{"send delay with the rate missed", func(s *Step) {
			s.Generator.SendDelayP99MS = 3.1
			s.ActualRPS = 500
		}, GeneratorBound, "load generator behind its schedule: send delay p99 3.1 ms > 1ms", 0, false},
		// 32 connections at 1000 rps with a mean of 31 ms need 31 in
		// flight: every connection was busy, so the system under test
		// capped the rate, however late the generator was.
		{"send delay with the rate missed and every connection busy", func(s *Step) {
			s.Generator.SendDelayP99MS = 3.1
			s.ActualRPS = 500
			s.Connections, s.MeanMS = 32, 31
		}, RateNotKept, "actual 500 rps of 1000 requested (50%)", 0, false},
		{"send delay with the rate missed and connections free", func(s *Step) {
			s.Generator.SendDelayP99MS = 3.1
			s.ActualRPS = 500
			s.Connections, s.MeanMS = 32, 2
		}, GeneratorBound, "load generator behind its schedule: send delay p99 3.1 ms > 1ms", 0, false},
		// Late sends are not in the latency (it counts from each send), so
		// they do not explain a missed objective while the rate was kept.
		{"send delay with an objective broken but the rate kept", func(s *Step) {
			s.Generator.SendDelayP99MS = 3.1
			s.Latency[2].MS = 9
		}, ObjectiveBroken, "p99 9 ms > 5ms", 1, false},
		{"send delay alone does not stop", func(s *Step) { s.Generator.SendDelayP99MS = 3.1 },
			WithinObjectives, "", 0, false},
		{"failed first", func(s *Step) {
			s.Failed, s.FailureReason = true, "the server exited"
			s.Generator.VCPU = 2
		}, RunFailed, "the run failed: the server exited", 0, false},
		{"server bound is a flag", func(s *Step) { s.Server.VCPU = 1.9 }, WithinObjectives, "", 0, true},
		{"unknown CPU is not saturation", func(s *Step) { s.Generator.VCPU = nan; s.Generator.Cores = nan },
			WithinObjectives, "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := step(1000, 0.5, 2, 4)
			tc.step(&s)
			j := Judge(s, objs)
			if j.Verdict != tc.verdict || j.Detail != tc.detail || len(j.Broken) != tc.broken || j.ServerBound != tc.serverBound {
				t.Errorf("Judge = %+v; want %s %q, %d broken, server bound %v", j, tc.verdict, tc.detail, tc.broken, tc.serverBound)
			}
			if j.Stops() != (tc.verdict != WithinObjectives) {
				t.Errorf("Stops() = %v for %s", j.Stops(), j.Verdict)
			}
		})
	}
}

// run plays a search against a system whose verdict at each rate is
// judge's, and returns the rates it ran, refined ones marked with "r".
func run(s *Search, judge func(rps int) Verdict) []any {
	var ran []any
	for i := 0; i < 100; i++ {
		rps, refined, ok := s.Next()
		if !ok {
			return ran
		}
		if refined {
			ran = append(ran, "r", rps)
		} else {
			ran = append(ran, rps)
		}
		v := judge(rps)
		j := Judgement{Verdict: v}
		if v == ObjectiveBroken {
			j.Detail = "p99 6.12 ms > 5ms"
		}
		s.Record(rps, j)
	}
	panic("search did not end")
}

func TestSearch(t *testing.T) {
	ladder := []int{1000, 2000, 3000, 4000, 5000}
	brokenFrom := func(limit int, v Verdict) func(int) Verdict {
		return func(rps int) Verdict {
			if rps >= limit {
				return v
			}
			return WithinObjectives
		}
	}
	tests := []struct {
		name          string
		refine        int
		judge         func(int) Verdict
		ran           []any
		reason        string
		notMetAtStart bool
	}{
		{"ladder only", 2, brokenFrom(99999, ObjectiveBroken), []any{1000, 2000, 3000, 4000, 5000},
			"reached the end of the range (5000 rps) within the objectives", false},
		// 3000 holds, 4000 breaks: 3500 holds (lo moves), 3800 breaks (hi moves).
		{"stop then refinements", 2, brokenFrom(3600, ObjectiveBroken),
			[]any{1000, 2000, 3000, 4000, "r", 3500, "r", 3800},
			"objective broken at 4000 rps: p99 6.12 ms > 5ms", false},
		{"refinements moving hi", 3, brokenFrom(3100, ObjectiveBroken),
			[]any{1000, 2000, 3000, 4000, "r", 3500, "r", 3300, "r", 3200},
			"objective broken at 4000 rps: p99 6.12 ms > 5ms", false},
		{"no refinement when not asked", 0, brokenFrom(3600, ObjectiveBroken),
			[]any{1000, 2000, 3000, 4000}, "objective broken at 4000 rps: p99 6.12 ms > 5ms", false},
		{"generator-bound is not refined", 2, brokenFrom(4000, GeneratorBound),
			[]any{1000, 2000, 3000, 4000}, "generator-bound at 4000 rps", false},
		{"first step stops", 2, brokenFrom(0, ObjectiveBroken), []any{1000},
			"objective broken at 1000 rps: p99 6.12 ms > 5ms", true},
		{"first step generator-bound is not unmet", 2, brokenFrom(0, GeneratorBound), []any{1000},
			"generator-bound at 1000 rps", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSearch(ladder, tc.refine)
			ran := run(s, tc.judge)
			if !reflect.DeepEqual(ran, tc.ran) {
				t.Errorf("ran %v; want %v", ran, tc.ran)
			}
			if got := s.StopReason(); got != tc.reason {
				t.Errorf("StopReason() = %q; want %q", got, tc.reason)
			}
			if s.NotMetAtStart() != tc.notMetAtStart {
				t.Errorf("NotMetAtStart() = %v", s.NotMetAtStart())
			}
		})
	}
}

func TestSearchStopsRefiningWhenClose(t *testing.T) {
	// 1000 → 1040 is under 5% of 1000: nothing to refine.
	s := NewSearch([]int{1000, 1040}, 3)
	ran := run(s, func(rps int) Verdict {
		if rps > 1000 {
			return RateNotKept
		}
		return WithinObjectives
	})
	if !reflect.DeepEqual(ran, []any{1000, 1040}) {
		t.Errorf("ran %v; want [1000 1040]", ran)
	}
}

func TestNiceRate(t *testing.T) {
	for in, want := range map[int]int{3500: 3500, 3749: 3700, 3750: 3800, 45: 45, 12345: 12000, 150: 150} {
		if got := niceRate(in); got != want {
			t.Errorf("niceRate(%d) = %d; want %d", in, got, want)
		}
	}
}
