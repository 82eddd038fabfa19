package dashboard

import (
	"fmt"
	"net/http"

	"github.com/meshperf/meshperf/internal/export"
	"github.com/meshperf/meshperf/internal/results"
)

// runPage is what /runs/{id} shows: the lab report of the invocation (its
// header and body, the same as report.html's) and then each run's latency
// as Fortio's UI draws a result, grouped by mode.
type runPage struct {
	RunID, Scenario string
	Report          results.ReportParts
	Modes           []modeRuns
}

// modeRuns are one mode's runs (its repetitions, and any other point of
// the matrix) in start order.
type modeRuns struct {
	Mode string
	Runs []runChart
}

// runChart is one run with its chart, named as its Fortio JSON's address.
type runChart struct {
	Name  string // export.ResultName: unique within the invocation
	Run   results.Run
	Chart results.RunChart
}

func (s *server) runPage(r *http.Request) (view, error) {
	runs, err := s.invocationRuns(r)
	if err != nil {
		return view{}, err
	}
	p := runPage{RunID: runs[0].RunID, Scenario: runs[0].Scenario}
	// A sweep's invocation shows its analysis in the report, as the
	// report the sweep wrote did.
	summary := results.Summarize(runs)
	if summary.Sweep, err = s.store.Sweep(p.RunID); err != nil {
		return view{}, err
	}
	if p.Report, err = results.RenderReport(runs, summary); err != nil {
		return view{}, err
	}
	for _, run := range runs {
		c, err := drawRun(run)
		if err != nil {
			return view{}, err
		}
		i := len(p.Modes)
		for j, m := range p.Modes {
			if m.Mode == run.Mode {
				i = j
			}
		}
		if i == len(p.Modes) {
			p.Modes = append(p.Modes, modeRuns{Mode: run.Mode})
		}
		p.Modes[i].Runs = append(p.Modes[i].Runs, runChart{Name: export.ResultName(run), Run: run, Chart: c})
	}
	return view{title: "Run " + p.RunID + " · " + p.Scenario, section: sectionRuns, data: p}, nil
}

// drawRun draws one run's latency under a title that says which run it is.
func drawRun(r results.Run) (results.RunChart, error) {
	title := fmt.Sprintf("%s, repetition %d: %d connections, %s qps", r.Mode, r.Repetition, r.Connections, results.QPSText(r.RequestedQPS))
	if r.Mode == "" { // a result file's: its labels say what it is
		title = fmt.Sprintf("%d connections, %s qps", r.Connections, results.QPSText(r.RequestedQPS))
		if r.Label != "" {
			title = r.Label + ": " + title
		}
	}
	return results.DrawRunLatency(title, r)
}

// runFortioJSON answers one run of an invocation in Fortio's JSON shape,
// rebuilt from the store: the server reads no result file for a request.
func (s *server) runFortioJSON(r *http.Request) (response, error) {
	runs, err := s.invocationRuns(r)
	if err != nil {
		return response{}, err
	}
	name := r.PathValue("result")
	for _, run := range runs {
		if export.ResultName(run) == name {
			data, err := export.RebuiltFortioJSON(run)
			if err != nil {
				return response{}, err
			}
			return response{contentType: jsonType, body: data}, nil
		}
	}
	return response{}, notFound("run %s has no result %q: its page (/runs/%s) links each of its runs", runs[0].RunID, name, runs[0].RunID)
}
