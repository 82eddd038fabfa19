package capacity

import (
	"fmt"
	"strings"
)

// Judge says what one step means for the sweep. The checks run in the
// order of the verdicts: a failed run says nothing; a saturated load
// generator explains any miss after it; errors and a rate not kept are
// the system giving way before its latency is worth reading; then the
// objectives. Broken lists every missed objective whatever the verdict.
func Judge(s Step, objs Objectives) Judgement {
	broken, brokenDetail := missedObjectives(s, objs)
	j := Judgement{Broken: broken, ServerBound: cpuSaturated(s.Server)}
	rateKept := !(s.ActualRPS < KeptRateShare*float64(s.RequestedRPS))
	switch {
	case s.Failed:
		j.Verdict, j.Detail = RunFailed, "the run failed"
		if s.FailureReason != "" {
			j.Detail += ": " + s.FailureReason
		}
	case cpuSaturated(s.Generator):
		j.Verdict = GeneratorBound
		j.Detail = fmt.Sprintf("load generator saturated: %s of %s vCPU",
			formatFigure(s.Generator.VCPU), formatFigure(s.Generator.Cores))
	case s.Generator.SendDelayP99MS > msOf(SendDelayLimit) && !rateKept && !connectionsBusy(s):
		// Only a rate missed is the generator's doing: its late sends are
		// not in the latency (which counts from each send), so with the
		// rate kept they cannot explain a missed objective. On a busy
		// machine a late timer wake-up is common even at 20 rps.
		j.Verdict = GeneratorBound
		j.Detail = fmt.Sprintf("load generator behind its schedule: send delay p99 %s ms > %s",
			formatFigure(s.Generator.SendDelayP99MS), SendDelayLimit)
	case s.ErrorPercent > MaxErrorPercent:
		j.Verdict = ErrorsSeen
		j.Detail = fmt.Sprintf("%s%% errors", formatFigure(s.ErrorPercent))
	case !rateKept:
		j.Verdict = RateNotKept
		j.Detail = fmt.Sprintf("actual %.0f rps of %d requested (%.0f%%)",
			s.ActualRPS, s.RequestedRPS, 100*s.ActualRPS/float64(s.RequestedRPS))
	case len(broken) > 0:
		j.Verdict, j.Detail = ObjectiveBroken, brokenDetail
	default:
		j.Verdict = WithinObjectives
	}
	return j
}

// Stops says the sweep must not raise the rate past this step.
func (j Judgement) Stops() bool {
	return j.Verdict != WithinObjectives
}

// missedObjectives are the objectives s misses, and the sentence naming
// each with its figure. A percentile the step did not measure cannot be
// said to be met, so it counts as missed.
func missedObjectives(s Step, objs Objectives) (Objectives, string) {
	var broken Objectives
	var why []string
	for _, o := range objs {
		ms, ok := s.At(o.Percentile)
		switch {
		case !ok:
			why = append(why, fmt.Sprintf("no p%s measured", formatPercentile(o.Percentile)))
		case ms > msOf(o.Limit):
			why = append(why, fmt.Sprintf("p%s %s ms > %s", formatPercentile(o.Percentile), formatFigure(ms), o.Limit))
		default:
			continue
		}
		broken = append(broken, o)
	}
	return broken, strings.Join(why, ", ")
}

// connectionsBusy says the requested rate needed (nearly) every
// connection at once, by Little's law: then the system's latency, not the
// generator, capped the rate. Unknown figures never say so.
func connectionsBusy(s Step) bool {
	if s.Connections <= 0 || !(s.MeanMS > 0) {
		return false
	}
	inFlight := float64(s.RequestedRPS) * s.MeanMS / 1000
	return inFlight >= BusyConnectionsShare*float64(s.Connections)
}

// cpuSaturated says a process used SaturatedCPUShare of the cores it may
// use; unknown figures never say so.
func cpuSaturated(s Saturation) bool {
	return s.Cores > 0 && s.VCPU >= SaturatedCPUShare*s.Cores
}

// Search is a sweep's rate search: the ladder's rates in order until a
// step stops it, then up to refine bisections between the last rate that
// held (lo) and the one that stopped it (hi), so the capacity is known
// more finely than the ladder's step without running every rate.
type Search struct {
	ladder     []int
	refineLeft int
	nextIndex  int
	recorded   int
	// lo and hi bound the capacity once the ladder stopped: lo the highest
	// rate that held, hi the lowest that did not.
	lo, hi  int
	stopped bool
	// first says the ladder's first step stopped it.
	first     bool
	stopRPS   int
	stopJudge Judgement
	refining  bool // a refinement rate was given and not yet recorded
	done      bool
}

// NewSearch starts a search over ladder (ascending rates) with at most
// refine refinement steps once it stops.
func NewSearch(ladder []int, refine int) *Search {
	return &Search{ladder: append([]int(nil), ladder...), refineLeft: max(refine, 0)}
}

// Next is the next rate to run; refined says it is a refinement between
// two measured rates; ok is false when the search is over.
func (s *Search) Next() (rps int, refined bool, ok bool) {
	if s.done {
		return 0, false, false
	}
	if !s.stopped {
		if s.nextIndex < len(s.ladder) {
			return s.ladder[s.nextIndex], false, true
		}
		s.done = true
		return 0, false, false
	}
	if s.first || !usable(s.stopJudge) || s.refineLeft == 0 {
		s.done = true
		return 0, false, false
	}
	mid := niceRate((s.lo + s.hi) / 2)
	if float64(s.hi-s.lo) < 0.05*float64(s.lo) || mid <= s.lo || mid >= s.hi {
		s.done = true
		return 0, false, false
	}
	s.refining = true
	return mid, true, true
}

// Record takes the judgement of the step run at rps, the rate Next gave.
func (s *Search) Record(rps int, j Judgement) {
	defer func() { s.recorded++ }()
	if s.stopped {
		if !s.refining {
			return
		}
		s.refining = false
		s.refineLeft--
		switch {
		case !j.Stops():
			s.lo = rps
		case usable(j):
			s.hi = rps
		default:
			// The generator, not the system, stopped this refinement:
			// nothing below it can be narrowed any better.
			s.hi = rps
			s.refineLeft = 0
		}
		return
	}
	s.nextIndex++
	if !j.Stops() {
		s.lo = rps
		return
	}
	s.stopped, s.first = true, s.recorded == 0
	s.hi, s.stopRPS, s.stopJudge = rps, rps, j
}

// StopReason is the sentence that says why the search stopped raising the
// rate; empty while it goes on.
func (s *Search) StopReason() string {
	switch {
	case s.stopped && s.stopJudge.Detail == "":
		return fmt.Sprintf("%s at %d rps", s.stopJudge.Verdict, s.stopRPS)
	case s.stopped:
		return fmt.Sprintf("%s at %d rps: %s", s.stopJudge.Verdict, s.stopRPS, s.stopJudge.Detail)
	case len(s.ladder) == 0:
		return "no rates to run"
	case s.nextIndex >= len(s.ladder):
		return fmt.Sprintf("reached the end of the range (%d rps) within the objectives", s.ladder[len(s.ladder)-1])
	}
	return ""
}

// NotMetAtStart says the very first rate already missed an objective, saw
// errors or could not be kept: the objectives cannot be met at any rate
// of this range.
func (s *Search) NotMetAtStart() bool {
	if !s.stopped || !s.first {
		return false
	}
	switch s.stopJudge.Verdict {
	case ObjectiveBroken, ErrorsSeen, RateNotKept:
		return true
	}
	return false
}

// niceRate rounds a rate to two significant digits (3749 → 3700), the
// way a person would pick a rate to try between two others.
func niceRate(rps int) int {
	if rps < 100 {
		return rps
	}
	unit := 1
	for rps/unit >= 100 {
		unit *= 10
	}
	return (rps + unit/2) / unit * unit
}
