package dashboard

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/results"
)

// runsPageParams are the runs page's filters: the API's, so that a page's
// address and its /api/runs twin select the same invocations.
var runsPageParams = invocationFilters

// runsPage is what the runs page shows: the filters as given, the choices
// the store offers for them, the matching invocations and the control-plane
// load tests.
type runsPage struct {
	Filters       map[string]string
	Scenarios     []string
	Modes         []string
	Machines      []option
	Invocations   []invocationJSON
	ControlPlanes []results.ControlPlaneRun
	// DataPlaneOnly says that a filter only data-plane runs have
	// (scenario, mode) is set, so the control-plane table is left out.
	DataPlaneOnly bool
}

// option is one choice of a select: the value sent, the text shown.
type option struct{ Value, Text string }

func (s *server) runsPage(r *http.Request) (view, error) {
	q := r.URL.Query()
	invocations, err := s.listInvocations(q)
	if err != nil {
		return view{}, err
	}
	all, err := s.store.Runs(results.Filter{})
	if err != nil {
		return view{}, err
	}
	p := runsPage{Filters: map[string]string{}, Invocations: invocations}
	for _, name := range invocationFilters {
		p.Filters[name] = q.Get(name)
	}
	for _, run := range all {
		p.Scenarios = appendMissing(p.Scenarios, run.Scenario)
		p.Modes = appendMissing(p.Modes, run.Mode)
		if m := run.Provenance.Machine; m.Key() != "" && !slices.ContainsFunc(p.Machines, func(o option) bool { return o.Value == m.Key() }) {
			p.Machines = append(p.Machines, option{Value: m.Key(), Text: m.Key()})
		}
	}
	slices.Sort(p.Scenarios)
	p.DataPlaneOnly = q.Get("scenario") != "" || q.Get("mode") != ""
	if !p.DataPlaneOnly {
		if p.ControlPlanes, err = s.matchingControlPlaneRuns(q); err != nil {
			return view{}, err
		}
	}
	return view{title: "Runs", section: sectionRuns, data: p}, nil
}

// matchingControlPlaneRuns are the stored cpload runs that the filters
// they apply to (mesh, label, search, machine, from, to) select, newest
// first.
func (s *server) matchingControlPlaneRuns(q url.Values) ([]results.ControlPlaneRun, error) {
	runs, err := s.store.ControlPlaneRuns()
	if err != nil {
		return nil, err
	}
	from, err := parseTime(q, "from", false)
	if err != nil {
		return nil, err
	}
	to, err := parseTime(q, "to", true)
	if err != nil {
		return nil, err
	}
	mesh, search := strings.ToLower(q.Get("mesh")), strings.ToLower(q.Get("search"))
	var out []results.ControlPlaneRun
	for _, r := range runs {
		p := r.Provenance
		switch {
		case !from.IsZero() && r.Start.Before(from), !to.IsZero() && !r.Start.Before(to):
		case q.Get("label") != "" && p.Labels != q.Get("label"):
		case q.Get("machine") != "" && p.Machine.Key() != q.Get("machine"):
		case mesh != "" && !anyContains(mesh, []string{p.ControlPlane.Describe()}):
		case search != "" && !anyContains(search, []string{r.Label, p.Labels}):
		default:
			out = append(out, r)
		}
	}
	slices.Reverse(out)
	return out, nil
}

// appendMissing appends v to list unless it is there (or empty).
func appendMissing(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}
