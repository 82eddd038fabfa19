package capacity

import (
	"math"

	"gonum.org/v1/gonum/stat"
)

// At is the fitted value at rps.
func (f Fit) At(rps float64) float64 {
	return f.Intercept + f.Slope*rps
}

// proxyRole is one proxy role seen in a mode's steps.
type proxyRole struct{ role, kind string }

// proxyRoles are the roles in steps, in the order they first appear.
func proxyRoles(steps []Step) []proxyRole {
	var roles []proxyRole
	seen := map[string]bool{}
	for _, s := range steps {
		for _, u := range s.Proxies {
			if !seen[u.Role] {
				seen[u.Role] = true
				roles = append(roles, proxyRole{u.Role, u.Kind})
			}
		}
	}
	return roles
}

// fitProxies fits each proxy role's vCPU and memory against the actual
// rate over the usable steps; a role and metric with fewer than two
// distinct rates measured has no fit.
func fitProxies(steps []Step, judgements []Judgement) []Fit {
	var fits []Fit
	for _, r := range proxyRoles(steps) {
		for _, metric := range []string{MetricVCPU, MetricMemMB} {
			rps, values := roleSeries(steps, judgements, r.role, metric)
			if fit, ok := fitLine(rps, values); ok {
				fit.Role, fit.Kind, fit.Metric = r.role, r.kind, metric
				fits = append(fits, fit)
			}
		}
	}
	return fits
}

// roleSeries are the (actual rate, value) pairs of one role's metric over
// the usable steps where both are known: one pair per step. Where several
// proxies share a role (a service graph's sidecars), the step's value is
// the busiest one's, since a per-proxy reservation must cover it.
func roleSeries(steps []Step, judgements []Judgement, role, metric string) (rps, values []float64) {
	for i, s := range steps {
		if !usable(judgements[i]) || !finite(s.ActualRPS) {
			continue
		}
		most, seen := math.Inf(-1), false
		for _, u := range s.Proxies {
			v := u.VCPU
			if metric == MetricMemMB {
				v = u.MemMB
			}
			if u.Role == role && finite(v) {
				most, seen = max(most, v), true
			}
		}
		if seen {
			rps, values = append(rps, s.ActualRPS), append(values, most)
		}
	}
	return rps, values
}

// fitLine is the ordinary least-squares line through the points, with
// its R² (NaN when every value is the same: there is no variance to
// explain) and the residuals' standard deviation (n−2 degrees of
// freedom; 0 for two points, which the line passes through).
func fitLine(x, y []float64) (Fit, bool) {
	if len(x) < 2 {
		return Fit{}, false
	}
	fit := Fit{Points: len(x), MinRPS: x[0], MaxRPS: x[0]}
	for _, v := range x {
		fit.MinRPS, fit.MaxRPS = min(fit.MinRPS, v), max(fit.MaxRPS, v)
	}
	if fit.MinRPS == fit.MaxRPS {
		return Fit{}, false
	}
	fit.Intercept, fit.Slope = stat.LinearRegression(x, y, nil, false)
	fit.R2 = math.NaN()
	flat := true
	for _, v := range y {
		flat = flat && v == y[0]
	}
	if !flat {
		fit.R2 = stat.RSquared(x, y, nil, fit.Intercept, fit.Slope)
	}
	if len(x) > 2 {
		var squares float64
		for i := range x {
			r := y[i] - fit.At(x[i])
			squares += r * r
		}
		fit.ResidualSD = math.Sqrt(squares / float64(len(x)-2))
	}
	return fit, true
}

func finite(v float64) bool {
	return !math.IsNaN(v) && !math.IsInf(v, 0)
}
