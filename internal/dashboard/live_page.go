package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// The live pages' templates, script and style, embedded: the dashboard
// needs nothing from the network.
//
//go:embed web/live*
var liveWeb embed.FS

var liveTemplates = template.Must(template.ParseFS(liveWeb, "web/live_list.html", "web/live_session.html"))

// liveAssets are served under /live-assets/.
var liveAssets = map[string]string{"live.js": "text/javascript; charset=utf-8", "live.css": "text/css; charset=utf-8"}

func (s *server) liveAsset() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		contentType, ok := liveAssets[name]
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no live page asset %q", name))
			return
		}
		b, err := fs.ReadFile(liveWeb, "web/"+name)
		if err != nil {
			writeError(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(b)
	})
}

// liveScenario is a shipped scenario as the start form offers it.
type liveScenario struct {
	Name  string
	Runs  int
	About string
}

func (s *server) liveListPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data := struct {
			Sessions            []liveSessionView
			Scenarios           []liveScenario
			CanStart, NeedToken bool
		}{Sessions: s.live.list(), CanStart: s.labs != nil, NeedToken: s.token != ""}
		if s.labs != nil {
			list, err := scenario.List()
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			for _, sc := range list {
				data.Scenarios = append(data.Scenarios, liveScenario{Name: sc.Name, Runs: len(sc.Expand()),
					About: sc.EstimatedDuration().Round(time.Second).String()})
			}
		}
		s.writePage(w, "live_list.html", data)
	})
}

func (s *server) liveSessionPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v, svg, ok := s.liveChartOf(w, r)
		if !ok {
			return
		}
		data := struct {
			liveSessionDetail
			Chart template.HTML
		}{v, template.HTML(results.InlineSVG(svg, "rate and P99 over time"))} // our own SVG, drawn from numbers
		s.writePage(w, "live_session.html", data)
	})
}

// writePage renders a template fully before writing, so that a template
// error is a 500 rather than half a page.
func (s *server) writePage(w http.ResponseWriter, name string, data any) {
	var b bytes.Buffer
	if err := liveTemplates.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("render page", "page", name, "error", err)
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
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
