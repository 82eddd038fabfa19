package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

// controlPlaneRunPage is what /cpruns/{label} shows: one control-plane load
// test's stored figures, its provenance and what its report holds.
type controlPlaneRunPage struct {
	Run results.ControlPlaneRun
	// Figures are the stored columns, in the order cpload prints them.
	Figures []figure
	// Report is the stored report, a table per part; nil when it is not
	// JSON.
	Report []reportPart
	// Others are the other tests stored under the same label, by start.
	Others []time.Time
}

// figure is one stored figure with its unit; Value nil when not measured.
type figure struct {
	Name, Unit string
	Value      *float64
}

// reportPart is one object of the report (connect, configSize, churn,
// controlPlane, process…), flattened to dotted keys, or for "report" the
// report's own top-level values.
type reportPart struct {
	Name string
	Rows [][2]string
}

func (s *server) controlPlaneRunPage(r *http.Request) (view, error) {
	run, others, err := s.controlPlaneRunOf(r)
	if err != nil {
		return view{}, err
	}
	f := func(v int) *float64 { x := float64(v); return &x }
	p := controlPlaneRunPage{Run: run, Others: others, Figures: []figure{
		{"proxies", "", f(run.Proxies)}, {"services", "", f(run.Services)}, {"changes", "", f(run.Changes)},
		{"missed", "", f(run.Missed)}, {"pushes", "", run.Pushes},
		{"convergence P50", "ms", run.ConvergenceP50}, {"convergence P90", "ms", run.ConvergenceP90}, {"convergence P99", "ms", run.ConvergenceP99},
		{"end-to-end P50", "ms", run.E2EP50}, {"end-to-end P90", "ms", run.E2EP90}, {"end-to-end P99", "ms", run.E2EP99},
		{"end-to-end max", "ms", run.E2EMax}, {"all synced", "ms", run.AllSyncedMs}, {"CPU", "s", run.CPUSeconds},
		{"RSS max", "MiB", run.RSSMaxMB}, {"config per sidecar", "bytes", run.ConfigBytesMean},
	}}
	p.Report = reportParts(run.ReportJSON)
	return view{title: "Control-plane load test " + run.Label, section: sectionRuns, data: p}, nil
}

// controlPlaneRunOf is the test the request's {label} (and start, among
// tests stored under one label) names, and the starts of the label's
// other tests. A label is not unique in cp_runs (cpload -name is free
// text): without start the newest is taken.
func (s *server) controlPlaneRunOf(r *http.Request) (results.ControlPlaneRun, []time.Time, error) {
	label := r.PathValue("label")
	all, err := s.store.ControlPlaneRuns()
	if err != nil {
		return results.ControlPlaneRun{}, nil, err
	}
	var same []results.ControlPlaneRun
	for _, run := range all {
		if run.Label == label {
			same = append(same, run)
		}
	}
	if len(same) == 0 {
		return results.ControlPlaneRun{}, nil, notFound("unknown control-plane load test %q: GET /api/cpruns lists the stored ones", label)
	}
	pick := len(same) - 1
	if v := r.URL.Query().Get("start"); v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return results.ControlPlaneRun{}, nil, badRequest("start=%q: want the test's start, RFC 3339 (as the page links it)", v)
		}
		if pick = slices.IndexFunc(same, func(c results.ControlPlaneRun) bool { return c.Start.Equal(at) }); pick < 0 {
			return results.ControlPlaneRun{}, nil, notFound("no control-plane load test %q started at %s", label, v)
		}
	}
	var others []time.Time
	for i, run := range same {
		if i != pick {
			others = append(others, run.Start)
		}
	}
	return same[pick], others, nil
}

// controlPlaneRun answers one test: every stored figure, the provenance
// and the report as cpload wrote it.
func (s *server) controlPlaneRun(r *http.Request) (response, error) {
	run, _, err := s.controlPlaneRunOf(r)
	if err != nil {
		return response{}, err
	}
	return response{value: controlPlaneRunJSONOf(run)}, nil
}

// reportParts flattens a stored report for the page: its top-level
// values as one part, each top-level object as a part of its own, in
// the report's order.
func reportParts(raw string) []reportPart {
	var top orderedObject
	if err := json.Unmarshal([]byte(raw), &top); err != nil {
		return nil
	}
	parts := []reportPart{{Name: "report"}}
	for _, kv := range top {
		if obj, ok := kv.value.(orderedObject); ok {
			part := reportPart{Name: kv.key}
			flatten(&part.Rows, "", obj)
			if len(part.Rows) > 0 {
				parts = append(parts, part)
			}
			continue
		}
		parts[0].Rows = append(parts[0].Rows, [2]string{kv.key, valueText(kv.value)})
	}
	if len(parts[0].Rows) == 0 {
		parts = parts[1:]
	}
	return parts
}

func flatten(rows *[][2]string, prefix string, obj orderedObject) {
	for _, kv := range obj {
		if inner, ok := kv.value.(orderedObject); ok {
			flatten(rows, prefix+kv.key+".", inner)
			continue
		}
		*rows = append(*rows, [2]string{prefix + kv.key, valueText(kv.value)})
	}
}

// valueText writes a report's value: numbers as they were written,
// lists joined.
func valueText(v any) string {
	switch x := v.(type) {
	case nil:
		return "–"
	case string:
		return x
	case json.Number:
		return x.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = valueText(e)
		}
		return strings.Join(parts, "; ")
	case orderedObject:
		var b strings.Builder
		for i, kv := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(kv.key + ": " + valueText(kv.value))
		}
		return b.String()
	}
	return fmt.Sprint(v)
}

// orderedObject is a JSON object with its keys in the order written (a
// map would sort them): the report reads in cpload's order.
type orderedObject []keyValue

type keyValue struct {
	key   string
	value any
}

func (o *orderedObject) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeOrdered(dec)
	if err != nil {
		return err
	}
	obj, ok := v.(orderedObject)
	if !ok {
		return fmt.Errorf("not a JSON object")
	}
	*o = obj
	return nil
}

func decodeOrdered(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := orderedObject{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			obj = append(obj, keyValue{k.(string), v})
		}
		_, err := dec.Token() // }
		return obj, err
	case json.Delim('['):
		list := []any{}
		for dec.More() {
			v, err := decodeOrdered(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err := dec.Token() // ]
		return list, err
	}
	return tok, nil
}
