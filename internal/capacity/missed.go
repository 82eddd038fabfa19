package capacity

import "fmt"

// LowestRateMissed is the sentence for a sweep whose first, lowest rate
// already missed (Search.NotMetAtStart), so that no rate of its range can
// do better: what cannot be met — the objectives, or without any the rate
// without errors — and the step's figure, e.g. "cannot meet p99=5ms even
// at the lowest rate, 500 rps (p99 7.2 ms > 5ms)". The load generator's
// sweep and the lab's, per mode, both say it.
func LowestRateMissed(objs Objectives, first Step, j Judgement) string {
	what := "the rate without errors"
	if len(objs) > 0 {
		what = objs.String()
	}
	return fmt.Sprintf("cannot meet %s even at the lowest rate, %d rps (%s)", what, first.RequestedRPS, j.Detail)
}
