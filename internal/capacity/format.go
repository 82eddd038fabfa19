package capacity

import (
	"math"
	"strconv"
	"time"
)

// formatFigure writes a measured figure to three significant digits
// without trailing zeros or exponents: 6.12, 0.31, 2, 1940.
func formatFigure(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "?"
	}
	if math.Abs(v) >= 1000 {
		return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
	}
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 3, 64), 64)
	if err != nil {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(rounded, 'f', -1, 64)
}

// msOf is a duration in milliseconds, the unit steps' latencies are in.
func msOf(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}

// usable says a step's measurements describe the system under test: not a
// failed run, not one the load generator limited.
func usable(j Judgement) bool {
	return j.Verdict != RunFailed && j.Verdict != GeneratorBound
}
