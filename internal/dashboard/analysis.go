package dashboard

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/meshperf/meshperf/internal/changepoint"
	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/history"
	"github.com/meshperf/meshperf/internal/results"
)

// compare answers meshperf compare's report. The sides are looked up in
// the store only (results.ResolveStored): a request names runs, never
// files on the server's disk.
func (s *server) compare(r *http.Request) (response, error) {
	q := r.URL.Query()
	opt, err := compareOptions(q)
	if err != nil {
		return response{}, err
	}
	var sides [2]compare.Side
	for i, name := range []string{"a", "b"} {
		sel := q.Get(name)
		if sel == "" {
			return response{}, badRequest("%s is missing: compare wants a=SELECTOR&b=SELECTOR (run ids or labels)", name)
		}
		if sides[i], err = s.compareSide(sel, "side "+name); err != nil {
			return response{}, err
		}
	}
	var b bytes.Buffer
	if err := compare.WriteJSON(&b, compare.Compare(sides[0], sides[1], opt)); err != nil {
		return response{}, err
	}
	return response{contentType: jsonType, body: b.Bytes()}, nil
}

// compareOptions reads compare's threshold and confidence, both percents,
// compare's defaults when absent.
func compareOptions(q url.Values) (compare.Options, error) {
	opt := compare.DefaultOptions
	confidence, err := floatParam(q, "confidence", 100*opt.Confidence)
	if err != nil {
		return opt, err
	}
	if confidence <= 0 || confidence >= 100 {
		return opt, badRequest("confidence=%v: want a percent more than 0 and less than 100", confidence)
	}
	opt.Confidence = confidence / 100
	if opt.ThresholdPct, err = floatParam(q, "threshold", opt.ThresholdPct); err != nil {
		return opt, err
	}
	if opt.ThresholdPct < 0 {
		return opt, badRequest("threshold=%v: want a percent, 0 or more", opt.ThresholdPct)
	}
	return opt, nil
}

// compareSide is the stored runs a selector names, or a 404 naming the
// side (what the request called it).
func (s *server) compareSide(sel, side string) (compare.Side, error) {
	runs, err := results.ResolveStored(s.store, sel)
	switch {
	case errors.Is(err, results.ErrNoRunMatches):
		return compare.Side{}, notFound("%s: %v", side, err)
	case err != nil:
		return compare.Side{}, err
	}
	return compare.Side{Selector: sel, Runs: runs}, nil
}

// history answers meshperf history's analysis of a lab scenario, with the
// command's defaults: p99, grouped by version, this machine's runs if it
// has any.
func (s *server) history(r *http.Request) (response, error) {
	q := r.URL.Query()
	hq, err := historyQuery(q, cmp.Or(q.Get("metric"), "p99"))
	if err != nil {
		return response{}, err
	}
	if err := s.knownScenario(hq.Scenario); err != nil {
		return response{}, err
	}
	a, err := s.analyzeHistory(hq)
	if err != nil {
		return response{}, err
	}
	var b bytes.Buffer
	if err := history.WriteJSON(&b, a); err != nil {
		return response{}, err
	}
	return response{contentType: jsonType, body: b.Bytes()}, nil
}

// historyQuery reads history's query (scenario, mode, machine, by, qps,
// conn) for metric, a lab figure; bad values are 400s.
func historyQuery(q url.Values, metric string) (history.Query, error) {
	hq := history.Query{Scenario: q.Get("scenario"), Mode: q.Get("mode"), Machine: q.Get("machine"),
		Local: results.LocalMachine()}
	if hq.Scenario == "" {
		return hq, badRequest("scenario is missing: history follows one scenario (GET /api/scenarios lists them)")
	}
	var err error
	if hq.Metric, err = history.LookupMetric(metric); err != nil {
		return hq, badRequest("metric: %v", err)
	}
	if hq.Metric.ControlPlane() {
		return hq, badRequest("metric %s is a cpload figure: want one of %s", hq.Metric.Name, history.MetricNames(false))
	}
	if hq.By, err = history.ParseGroupBy(cmp.Or(q.Get("by"), string(history.ByVersion))); err != nil {
		return hq, badRequest("by: %v", err)
	}
	if hq.QPS, err = countParam(q, "qps"); err != nil {
		return hq, err
	}
	if hq.Connections, err = countParam(q, "conn"); err != nil {
		return hq, err
	}
	return hq, nil
}

// analyzeHistory builds hq's series from the store and finds its change
// points, as meshperf history does; a selection the store cannot answer
// is a 400.
func (s *server) analyzeHistory(hq history.Query) (history.Analysis, error) {
	runs, err := s.store.Runs(results.Filter{Scenario: hq.Scenario})
	if err != nil {
		return history.Analysis{}, err
	}
	series, err := history.Build(runs, hq)
	var selection history.SelectionError
	switch {
	case errors.As(err, &selection):
		return history.Analysis{}, badRequest("%v", err)
	case err != nil:
		return history.Analysis{}, err
	}
	// Too few points is an answer here, not an error: the points are
	// there, "detected" is false and there are no change points.
	a, err := history.Analyze(series, changepoint.DefaultOptions())
	if err != nil && !errors.Is(err, history.ErrTooFewPoints) {
		return history.Analysis{}, err
	}
	return a, nil
}

// floatParam reads a finite number, def when the parameter is absent.
func floatParam(q url.Values, name string, def float64) (float64, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badRequest("%s=%q: want a number", name, v)
	}
	return f, nil
}

// countParam reads a whole number, 0 or more; -1 when the parameter is
// absent (history.Query's "the only one there is").
func countParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q: want a whole number, 0 or more", name, v)
	}
	return n, nil
}
