package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// liveScenario is a shipped scenario as the start form offers it.
type liveScenario struct {
	Name  string
	Runs  int
	About string
}

// liveListPage lists the live sessions, with a form that starts a shipped
// scenario when the dashboard can start runs.
func (s *server) liveListPage(*http.Request) (view, error) {
	data := struct {
		Sessions            []liveSessionView
		Scenarios           []liveScenario
		CanStart, NeedToken bool
	}{Sessions: s.live.list(), CanStart: s.labs != nil, NeedToken: s.guard.Token != ""}
	if s.labs != nil {
		list, err := scenario.List()
		if err != nil {
			return view{}, err
		}
		for _, sc := range list {
			data.Scenarios = append(data.Scenarios, liveScenario{Name: sc.Name, Runs: len(sc.Expand()),
				About: sc.EstimatedDuration().Round(time.Second).String()})
		}
	}
	return view{title: "Live runs", section: sectionLive, data: data}, nil
}

// liveSessionPage is one session as it runs: its figures update from the
// event stream, its chart is redrawn on each event (live.js).
func (s *server) liveSessionPage(r *http.Request) (view, error) {
	v, ok := s.live.get(r.PathValue("id"))
	if !ok {
		return view{}, notFound("no live session %q: /live lists them", r.PathValue("id"))
	}
	svg, err := liveChartSVG(v)
	if err != nil {
		return view{}, fmt.Errorf("live chart of %s: %w", v.ID, err)
	}
	data := struct {
		liveSessionDetail
		Chart template.HTML
	}{v, template.HTML(results.InlineSVG(svg, "rate and P99 over time"))} // our own SVG, drawn from numbers
	return view{title: "Live: " + v.Source + " " + v.ID, section: sectionLive, data: data}, nil
}

func (s *server) liveChart() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, svg, ok := s.liveChartOf(w, r)
		if !ok {
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(svg)
	})
}

// liveChartOf is the session the request names with its chart; it has
// answered the request (404, 500) when ok is false.
func (s *server) liveChartOf(w http.ResponseWriter, r *http.Request) (v liveSessionDetail, svg []byte, ok bool) {
	v, ok = s.live.get(r.PathValue("id"))
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no live session %q", r.PathValue("id")))
		return v, nil, false
	}
	svg, err := liveChartSVG(v)
	if err != nil {
		s.writeHandlerError(w, r, fmt.Errorf("live chart of %s: %w", v.ID, err))
		return v, nil, false
	}
	return v, svg, true
}

// liveChartSVG draws the session's rate and P99 over its time, one line
// per mode of the lab's matrix (a load's run is one line).
func liveChartSVG(v liveSessionDetail) ([]byte, error) {
	var order []string
	rate := map[string]*results.TimeLine{}
	p99 := map[string]*results.TimeLine{}
	mode := "load"
	for _, e := range v.Events {
		switch {
		case e.Kind == live.KindRun:
			mode = e.Mode
		case e.Kind == live.KindProgress && e.Calls > 0:
			if rate[mode] == nil {
				order = append(order, mode)
				rate[mode], p99[mode] = &results.TimeLine{Name: mode}, &results.TimeLine{Name: mode}
			}
			t := e.Time.Sub(v.Started).Seconds()
			rate[mode].Xs, rate[mode].Ys = append(rate[mode].Xs, t), append(rate[mode].Ys, e.QPS)
			p99[mode].Xs, p99[mode].Ys = append(p99[mode].Xs, t), append(p99[mode].Ys, e.P99Ms)
		}
	}
	var rates, p99s []results.TimeLine
	for _, m := range order {
		rates, p99s = append(rates, *rate[m]), append(p99s, *p99[m])
	}
	return results.TimeChartSVG("seconds since the session started", []results.TimePanel{
		{Title: "Rate", YLabel: "requests/s", Lines: rates},
		{Title: "P99 so far", YLabel: "ms", Lines: p99s},
	})
}
