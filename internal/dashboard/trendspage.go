package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/meshperf/meshperf/internal/history"
	"github.com/meshperf/meshperf/internal/results"
)

// trendsPageParams are /api/history's: a page's address and its API twin
// select the same series.
var trendsPageParams = []string{"scenario", "metric", "mode", "by", "qps", "conn", "machine"}

// trendsPage is what the trends page shows: a scenario's figures across
// its invocations, as meshperf history computes them, one panel per
// metric (or the one asked for), with the change points history found;
// without a scenario, the scenarios to pick from.
type trendsPage struct {
	Scenario  string
	Scenarios []results.ScenarioRuns
	Filters   map[string]string
	Metrics   []string // the lab's metrics, for the select
	Modes     []string // the scenario's, for the select
	Groupings []history.GroupBy
	// Cell and Machine say what the series measure (history's first lines).
	Cell, Machine, MachineChoice string
	Panels                       []trendPanel
}

// trendPanel is one metric's series: its chart, its change points, or why
// it has none.
type trendPanel struct {
	Metric, Unit string
	Chart        *results.Chart
	Changes      []trendChange
	Note         string
}

// trendChange is a change point with what the page says and links.
type trendChange struct {
	history.Change
	ID    string // stable: cp-METRIC-N
	Label string // "+50.0% regression", as the chart marks it
	Class string // worse, better or same
}

func (s *server) trendsPage(r *http.Request) (view, error) {
	q := r.URL.Query()
	p := trendsPage{Scenario: q.Get("scenario"), Filters: map[string]string{},
		Groupings: []history.GroupBy{history.ByVersion, history.ByCommit, history.ByDate}}
	for _, name := range trendsPageParams {
		p.Filters[name] = q.Get(name)
	}
	if p.Scenario == "" {
		var err error
		p.Scenarios, err = s.store.Scenarios()
		return view{title: "Trends", section: sectionTrends, data: p}, err
	}
	for _, m := range history.Metrics {
		if !m.ControlPlane() {
			p.Metrics = append(p.Metrics, m.Name)
		}
	}
	metrics := p.Metrics
	if m := q.Get("metric"); m != "" {
		metrics = []string{m}
	}
	// The first metric's query checks the request: a bad by, rate or
	// count is a 400 whichever metric it is read for.
	if _, err := historyQuery(q, metrics[0]); err != nil {
		return view{}, err
	}
	if err := s.knownScenario(p.Scenario); err != nil {
		return view{}, err
	}
	runs, err := s.store.Runs(results.Filter{Scenario: p.Scenario})
	if err != nil {
		return view{}, err
	}
	for _, run := range runs {
		p.Modes = appendMissing(p.Modes, run.Mode)
	}
	for i, name := range metrics {
		hq, err := historyQuery(q, name)
		if err != nil {
			return view{}, err
		}
		a, err := s.analyzeHistory(hq)
		var re requestError
		switch {
		// A selection only some metrics refuse (added latency of no-mesh)
		// leaves their panels empty; one the first refuses is the
		// request's mistake.
		case errors.As(err, &re) && i > 0:
			p.Panels = append(p.Panels, trendPanel{Metric: name, Unit: hq.Metric.Unit, Note: re.msg})
			continue
		case err != nil:
			return view{}, err
		}
		if i == 0 {
			p.Cell, p.Machine, p.MachineChoice = a.Series.Cell(), a.Series.Machine, a.Series.MachineChoice
		}
		panel, err := trendPanelOf(a)
		if err != nil {
			return view{}, err
		}
		p.Panels = append(p.Panels, panel)
	}
	return view{title: "Trends of " + p.Scenario, section: sectionTrends, data: p}, nil
}

// trendPanelOf draws an analysis: its points by group, the change points
// marked where history found them.
func trendPanelOf(a history.Analysis) (trendPanel, error) {
	m := a.Series.Metric
	panel := trendPanel{Metric: m.Name, Unit: m.Unit}
	var groups []string
	var values []float64
	for _, pt := range a.Series.Points {
		groups, values = append(groups, pt.Group), append(values, pt.Value)
	}
	var marks []results.TrendMark
	for i, c := range a.Changes {
		tc := trendChange{Change: c, ID: fmt.Sprintf("cp-%s-%d", m.Name, i), Label: c.Size() + " " + c.Verdict, Class: "same"}
		mark := results.TrendMark{Index: c.Index, Label: tc.Label}
		switch c.Verdict {
		case history.Regression:
			tc.Class, mark.Shift = "worse", 1
		case history.Improvement:
			tc.Class, mark.Shift = "better", -1
		}
		panel.Changes = append(panel.Changes, tc)
		marks = append(marks, mark)
	}
	title := fmt.Sprintf("%s by %s", metricTitle(m), a.Series.By)
	chart, ok, err := results.TrendChart(title, m.Name, m.Unit, groups, values, marks)
	if err != nil {
		return panel, err
	}
	switch {
	case !ok:
		panel.Note = "no figure: " + m.Name + " was not measured in this mode"
	case !a.Detected:
		panel.Chart = &chart
		panel.Note = fmt.Sprintf("%d points: too few to look for change points (need %d)", len(groups), history.MinPoints)
	default:
		panel.Chart = &chart
		if len(a.Changes) == 0 {
			panel.Note = "no change point: the series is level within its noise"
		}
		if a.ShortForSignificance {
			panel.Note += fmt.Sprintf(" (with %d points a change is unlikely to reach p <= %v; a clean step needs about %d)",
				len(groups), a.Options.Significance, a.Options.MinPoints())
		}
	}
	return panel, nil
}

// metricTitle is how a chart's title names a metric: "P99", "Added P99",
// "vCPU per proxy per 1000 rps".
func metricTitle(m history.Metric) string {
	name, added := strings.CutPrefix(m.Name, "added-")
	switch {
	case strings.HasPrefix(name, "p") && m.Unit == "ms":
		name = "P" + name[1:]
		if name == "P999" {
			name = "P99.9"
		}
	default:
		return m.Unit
	}
	if added {
		return "Added " + name
	}
	return name
}
