package capacity

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// MaxRates bounds a range's ladder: each rate is a full measured run, so a
// longer ladder is a mistake in the step rather than a wish.
const MaxRates = 200

// MaxRangeRPS bounds a range's end: past it the load generator, not the
// mesh, is what a sweep would measure on any one machine.
const MaxRangeRPS = 1000000

// objectiveForm is the hint every malformed objective's error ends with.
const objectiveForm = "want pNN=DURATION, e.g. p99=5ms"

// ParseObjective reads one objective written "p99=5ms": a percentile from
// Percentiles and a Go duration above 0.
func ParseObjective(s string) (Objective, error) {
	name, limit, found := strings.Cut(s, "=")
	name, limit = strings.TrimSpace(name), strings.TrimSpace(limit)
	if !found || len(name) < 2 || (name[0] != 'p' && name[0] != 'P') || limit == "" {
		return Objective{}, fmt.Errorf("objective %q: %s", s, objectiveForm)
	}
	p, err := strconv.ParseFloat(name[1:], 64)
	if err != nil || strings.ContainsAny(name[1:], "eEnNiIxX_+-") {
		return Objective{}, fmt.Errorf("objective %q: %s", s, objectiveForm)
	}
	if !knownPercentile(p) {
		return Objective{}, fmt.Errorf("objective %q: percentile %s is not one of %s",
			s, formatPercentile(p), percentileList())
	}
	d, err := time.ParseDuration(limit)
	if err != nil {
		return Objective{}, fmt.Errorf("objective %q: the limit %q is not a duration such as 5ms or 500us", s, limit)
	}
	if d <= 0 {
		return Objective{}, fmt.Errorf("objective %q: the limit must be above 0", s)
	}
	return Objective{Percentile: p, Limit: d}, nil
}

// String writes the objective as ParseObjective reads it: "p99=5ms".
func (o Objective) String() string {
	return "p" + formatPercentile(o.Percentile) + "=" + o.Limit.String()
}

// Set adds one objective or a comma-separated list of them; it may be
// called again (a repeated flag) and appends. A percentile named twice is
// an error, and on any error nothing is added.
func (o *Objectives) Set(v string) error {
	added := Objectives{}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		obj, err := ParseObjective(part)
		if err != nil {
			return err
		}
		for _, seen := range append(append(Objectives{}, *o...), added...) {
			if seen.Percentile == obj.Percentile {
				return fmt.Errorf("objective %q: p%s already has an objective (%s)",
					part, formatPercentile(obj.Percentile), seen)
			}
		}
		added = append(added, obj)
	}
	*o = append(*o, added...)
	return nil
}

// String writes the objectives as Set reads them: "p99=5ms,p50=1ms".
func (o Objectives) String() string {
	parts := make([]string, len(o))
	for i, obj := range o {
		parts[i] = obj.String()
	}
	return strings.Join(parts, ",")
}

// ParseRange reads a ladder of rates written START:END[:STEP].
func ParseRange(s string) (Range, error) {
	parts := strings.Split(s, ":")
	if len(parts) == 1 {
		return Range{}, fmt.Errorf("range %q: a single rate is not a range; want START:END[:STEP], e.g. 100:2000:100", s)
	}
	if len(parts) > 3 {
		return Range{}, fmt.Errorf("range %q: want START:END[:STEP], e.g. 100:2000:100", s)
	}
	names := []string{"start", "end", "step"}
	values := make([]int, 3)
	for i, part := range parts {
		n, err := strconv.Atoi(part)
		if err != nil {
			return Range{}, fmt.Errorf("range %q: the %s %q is not a whole number", s, names[i], part)
		}
		values[i] = n
	}
	r := Range{Start: values[0], End: values[1], Step: values[2]}
	switch {
	case r.Start < 1:
		return Range{}, fmt.Errorf("range %q: the start must be at least 1 rps", s)
	case r.End < r.Start:
		return Range{}, fmt.Errorf("range %q: the start %d exceeds the end %d", s, r.Start, r.End)
	case r.End > MaxRangeRPS:
		return Range{}, fmt.Errorf("range %q: the end %d exceeds %d rps", s, r.End, MaxRangeRPS)
	case len(parts) == 3 && r.Step < 1:
		return Range{}, fmt.Errorf("range %q: the step must be at least 1", s)
	}
	if n := r.count(); n > MaxRates {
		return Range{}, fmt.Errorf("range %q: it makes %d rates, at most %d; use a larger step", s, n, MaxRates)
	}
	return r, nil
}

// String writes the range as ParseRange reads it.
func (r Range) String() string {
	if r.Step == 0 {
		return fmt.Sprintf("%d:%d", r.Start, r.End)
	}
	return fmt.Sprintf("%d:%d:%d", r.Start, r.End, r.Step)
}

// count is how many rates Rates gives, without making them.
func (r Range) count() int {
	if r.Start < 1 || r.End < r.Start {
		return 0
	}
	if r.Step > 0 {
		n := (r.End-r.Start)/r.Step + 1
		if (r.End-r.Start)%r.Step != 0 {
			n++
		}
		return n
	}
	n := 1 // End
	for rate := r.Start; rate < r.End; rate *= 2 {
		n++
	}
	return n
}

// Rates is the ladder: Start, then Start+Step (or doubling when Step is 0)
// while below End, and End last, once.
func (r Range) Rates() []int {
	if r.Start < 1 || r.End < r.Start || r.count() > MaxRates {
		return nil
	}
	var rates []int
	for rate := r.Start; rate < r.End; {
		rates = append(rates, rate)
		if r.Step > 0 {
			rate += r.Step
		} else {
			rate *= 2
		}
	}
	return append(rates, r.End)
}

// At is the step's latency at exactly percentile p, in milliseconds; ok is
// false when the step did not measure it.
func (s Step) At(p float64) (ms float64, ok bool) {
	for _, l := range s.Latency {
		if l.Percentile == p && l.MS == l.MS { // NaN is not a measurement
			return l.MS, true
		}
	}
	return 0, false
}

func knownPercentile(p float64) bool {
	for _, known := range Percentiles {
		if p == known {
			return true
		}
	}
	return false
}

func formatPercentile(p float64) string {
	return strconv.FormatFloat(p, 'f', -1, 64)
}

func percentileList() string {
	names := make([]string, len(Percentiles))
	for i, p := range Percentiles {
		names[i] = "p" + formatPercentile(p)
	}
	return strings.Join(names, ", ")
}
