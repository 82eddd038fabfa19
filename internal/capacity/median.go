package capacity

import (
	"math"
	"sort"
)

// MedianStep is one rate's repetitions as one step: each figure the median
// of the repetitions that ran (a failed one measured nothing), the way the
// lab's summary takes medians over a matrix's repetitions. On a noisy
// machine one slow run then no longer decides where a sweep stops or where
// its knee is. All failed: the first, failed. The proxies are matched by
// role and by their order within it (a graph's sidecars share a role).
func MedianStep(reps []Step) Step {
	var ran []Step
	for _, s := range reps {
		if !s.Failed {
			ran = append(ran, s)
		}
	}
	if len(ran) == 0 {
		if len(reps) == 0 {
			return Step{}
		}
		out := reps[0]
		out.Repetitions = len(reps)
		return out
	}
	out := ran[0]
	out.Repetitions = len(reps)
	out.ActualRPS = medianOf(ran, func(s Step) float64 { return s.ActualRPS })
	out.ErrorPercent = medianOf(ran, func(s Step) float64 { return s.ErrorPercent })
	out.MeanMS = medianOf(ran, func(s Step) float64 { return s.MeanMS })
	out.Generator = medianSaturation(ran, func(s Step) Saturation { return s.Generator })
	out.Server = medianSaturation(ran, func(s Step) Saturation { return s.Server })
	out.Latency = make([]PercentileMS, len(ran[0].Latency))
	for i, pm := range ran[0].Latency {
		out.Latency[i] = PercentileMS{Percentile: pm.Percentile, MS: medianOf(ran, func(s Step) float64 {
			ms, ok := s.At(pm.Percentile)
			if !ok {
				return math.NaN()
			}
			return ms
		})}
	}
	out.Proxies = make([]ProxyUsage, len(ran[0].Proxies))
	for i, u := range ran[0].Proxies {
		nth := occurrence(ran[0].Proxies, i)
		pick := func(s Step) (ProxyUsage, bool) { return nthOfRole(s.Proxies, u.Role, nth) }
		out.Proxies[i] = ProxyUsage{Role: u.Role, Kind: u.Kind,
			VCPU:  medianOf(ran, func(s Step) float64 { p, ok := pick(s); return orNaN(p.VCPU, ok) }),
			MemMB: medianOf(ran, func(s Step) float64 { p, ok := pick(s); return orNaN(p.MemMB, ok) })}
	}
	return out
}

func medianSaturation(steps []Step, get func(Step) Saturation) Saturation {
	return Saturation{
		VCPU:           medianOf(steps, func(s Step) float64 { return get(s).VCPU }),
		Cores:          get(steps[0]).Cores,
		SendDelayP99MS: medianOf(steps, func(s Step) float64 { return get(s).SendDelayP99MS }),
	}
}

// medianOf is the median of a figure over steps.
func medianOf(steps []Step, get func(Step) float64) float64 {
	v := make([]float64, len(steps))
	for i, s := range steps {
		v[i] = get(s)
	}
	return Median(v)
}

// Median of the values that are not NaN; NaN if there are none. An even
// count takes the mean of the middle two. (results' summaries take their
// medians with it too.)
func Median(v []float64) float64 {
	s := make([]float64, 0, len(v))
	for _, x := range v {
		if !math.IsNaN(x) {
			s = append(s, x)
		}
	}
	if len(s) == 0 {
		return math.NaN()
	}
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// occurrence is how many proxies before proxies[i] share its role.
func occurrence(proxies []ProxyUsage, i int) int {
	n := 0
	for _, p := range proxies[:i] {
		if p.Role == proxies[i].Role {
			n++
		}
	}
	return n
}

// nthOfRole is the nth proxy (from 0) of role.
func nthOfRole(proxies []ProxyUsage, role string, nth int) (ProxyUsage, bool) {
	for _, p := range proxies {
		if p.Role != role {
			continue
		}
		if nth == 0 {
			return p, true
		}
		nth--
	}
	return ProxyUsage{}, false
}

func orNaN(v float64, ok bool) float64 {
	if !ok {
		return math.NaN()
	}
	return v
}
