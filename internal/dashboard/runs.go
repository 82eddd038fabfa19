package dashboard

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// scenarioJSON is one scenario as /api/scenarios lists it.
type scenarioJSON struct {
	Scenario    string    `json:"scenario"`
	Invocations int       `json:"invocations"`
	Runs        int       `json:"runs"`
	First       time.Time `json:"first"`
	Last        time.Time `json:"last"`
}

func (s *server) scenarios(*http.Request) (response, error) {
	held, err := s.store.Scenarios()
	if err != nil {
		return response{}, err
	}
	out := make([]scenarioJSON, 0, len(held))
	for _, sc := range held {
		out = append(out, scenarioJSON{Scenario: sc.Scenario, Invocations: sc.Invocations, Runs: sc.Runs, First: sc.First, Last: sc.Last})
	}
	return response{value: out}, nil
}

// invocationJSON is one invocation (run id) as /api/runs lists it.
type invocationJSON struct {
	RunID      string         `json:"run_id"`
	Scenario   string         `json:"scenario"`
	Start      time.Time      `json:"start"` // of its first run
	Modes      []string       `json:"modes"` // in the order they ran
	Runs       int            `json:"runs"`
	Labels     []string       `json:"labels"` // the provenance's labels (Fortio's -labels)
	Provenance provenanceJSON `json:"provenance"`
}

// provenanceJSON is results.RunsProvenance: each distinct value once.
type provenanceJSON struct {
	Meshperf      []string `json:"meshperf"`
	DataPlanes    []string `json:"data_planes"`
	ControlPlanes []string `json:"control_planes"`
	ParamsHashes  []string `json:"params_hashes"`
	Labels        []string `json:"labels"`
	Machines      []string `json:"machines"`
}

func provenanceOf(runs []results.Run) provenanceJSON {
	p := results.ProvenanceOf(runs)
	return provenanceJSON{
		Meshperf: orEmpty(p.Meshperf), DataPlanes: orEmpty(p.DataPlanes), ControlPlanes: orEmpty(p.ControlPlanes),
		ParamsHashes: orEmpty(p.ParamsHashes), Labels: orEmpty(p.Labels), Machines: orEmpty(p.Machines),
	}
}

func (s *server) invocations(r *http.Request) (response, error) {
	out, err := s.listInvocations(r.URL.Query())
	if err != nil {
		return response{}, err
	}
	return response{value: out}, nil
}

// invocationFilters are the query parameters that select invocations, for
// /api/runs and the runs page alike.
var invocationFilters = []string{"scenario", "mode", "mesh", "label", "search", "machine", "from", "to"}

// listInvocations answers the invocations matching q's filters, newest
// first. scenario, label (the provenance's labels) and machine (its key)
// match exactly, as the store selects them; mode is one of the
// invocation's modes; mesh and search are case-insensitive substrings,
// mesh of the data and control planes under test ("meshperf-proxy 1.1",
// "istiod"), search of the run id, the runs' labels and the provenance's
// labels.
func (s *server) listInvocations(q url.Values) ([]invocationJSON, error) {
	f := results.Filter{Scenario: q.Get("scenario"), Labels: q.Get("label"), MachineKey: q.Get("machine")}
	var err error
	if f.From, err = parseTime(q, "from", false); err != nil {
		return nil, err
	}
	if f.To, err = parseTime(q, "to", true); err != nil {
		return nil, err
	}
	if f.Scenario != "" {
		if err := s.knownScenario(f.Scenario); err != nil {
			return nil, err
		}
	}
	runs, err := s.store.Runs(f)
	if err != nil {
		return nil, err
	}
	mode := q.Get("mode")
	mesh, search := strings.ToLower(q.Get("mesh")), strings.ToLower(q.Get("search"))
	out := []invocationJSON{}
	for _, inv := range groupByInvocation(runs) {
		if mode != "" && !slices.ContainsFunc(inv, func(r results.Run) bool { return r.Mode == mode }) {
			continue
		}
		prov := provenanceOf(inv)
		if mesh != "" && !anyContains(mesh, prov.DataPlanes, prov.ControlPlanes) {
			continue
		}
		if search != "" && !anyContains(search, []string{inv[0].RunID}, runLabels(inv), prov.Labels) {
			continue
		}
		j := invocationJSON{RunID: inv[0].RunID, Scenario: inv[0].Scenario, Start: inv[0].StartTime.UTC(),
			Modes: []string{}, Runs: len(inv), Labels: prov.Labels, Provenance: prov}
		for _, r := range inv {
			if !slices.Contains(j.Modes, r.Mode) {
				j.Modes = append(j.Modes, r.Mode)
			}
		}
		out = append(out, j)
	}
	slices.SortStableFunc(out, func(a, b invocationJSON) int { return b.Start.Compare(a.Start) })
	return out, nil
}

// anyContains reports whether any string of the lists contains needle
// (lower case), ignoring case.
func anyContains(needle string, lists ...[]string) bool {
	for _, list := range lists {
		for _, v := range list {
			if strings.Contains(strings.ToLower(v), needle) {
				return true
			}
		}
	}
	return false
}

func runLabels(runs []results.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.Label
	}
	return out
}

// groupByInvocation splits runs (in start order) by run id, each group in
// start order, the groups in the order of their first run.
func groupByInvocation(runs []results.Run) [][]results.Run {
	index := map[string]int{}
	var groups [][]results.Run
	for _, r := range runs {
		i, ok := index[r.RunID]
		if !ok {
			i = len(groups)
			index[r.RunID] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], r)
	}
	return groups
}

// knownScenario is a 404 for a scenario the store has no run of.
func (s *server) knownScenario(name string) error {
	held, err := s.store.Scenarios()
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(held, func(sc results.ScenarioRuns) bool { return sc.Scenario == name }) {
		return notFound("unknown scenario %q: the store has no runs of it (GET /api/scenarios lists them)", name)
	}
	return nil
}

// invocationRuns are the runs of the request's {id}, or a 404.
func (s *server) invocationRuns(r *http.Request) ([]results.Run, error) {
	id := r.PathValue("id")
	runs, err := s.store.Runs(results.Filter{RunID: id})
	if err == nil && len(runs) == 0 {
		err = notFound("unknown run id %q: GET /api/runs lists the stored ones", id)
	}
	return runs, err
}

// invocationDetail is what /api/runs/{id} answers.
type invocationDetail struct {
	RunID      string         `json:"run_id"`
	Scenario   string         `json:"scenario"`
	Provenance provenanceJSON `json:"provenance"`
	Runs       []runJSON      `json:"runs"`
	// Sweep is the capacity.Analysis of a sweep's invocation (its JSON
	// names, unknown figures as null); absent for any other invocation.
	Sweep json.RawMessage `json:"sweep,omitempty"`
}

func (s *server) invocation(r *http.Request) (response, error) {
	runs, err := s.invocationRuns(r)
	if err != nil {
		return response{}, err
	}
	d := invocationDetail{RunID: runs[0].RunID, Scenario: runs[0].Scenario, Provenance: provenanceOf(runs)}
	for _, run := range runs {
		d.Runs = append(d.Runs, runJSONOf(run))
	}
	sw, err := s.store.Sweep(d.RunID)
	if err != nil {
		return response{}, err
	}
	if sw != nil {
		if d.Sweep, err = results.MarshalNaN(sw.Analysis); err != nil {
			return response{}, err
		}
	}
	return response{value: d}, nil
}

func (s *server) invocationCSV(r *http.Request) (response, error) {
	runs, err := s.invocationRuns(r)
	if err != nil {
		return response{}, err
	}
	var b bytes.Buffer
	if err := results.WriteCSV(&b, runs); err != nil {
		return response{}, err
	}
	return response{contentType: "text/csv; charset=utf-8", body: b.Bytes()}, nil
}

// parseTime reads a time query parameter: RFC 3339, or a date
// (YYYY-MM-DD, UTC). A date as the end of a range ("to") takes in the
// whole day; zero when the parameter is absent.
func parseTime(q url.Values, name string, end bool) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	day, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, badRequest("%s=%q: want RFC 3339 (2026-11-25T09:00:00Z) or a date (2026-11-25)", name, v)
	}
	if end {
		day = day.AddDate(0, 0, 1)
	}
	return day, nil
}
