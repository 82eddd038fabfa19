// Package grafana holds meshperf's Grafana dashboards, shipped as the JSON
// files beside this one (docs/grafana.md says how to load them): the
// control plane's golden signals from pilot's Istio metric names, and the
// data plane's Istio standard metrics with each proxy's CPU and memory.
// The package gives tests their PromQL, with Grafana's variables replaced
// by values a query against the lab's Prometheus can use.
package grafana

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed *.json
var files embed.FS

// Files are the dashboards' file names.
func Files() []string {
	names, _ := fs.Glob(files, "*.json")
	sort.Strings(names)
	return names
}

// Read returns a dashboard file's bytes.
func Read(name string) ([]byte, error) { return files.ReadFile(name) }

// Query is one panel target's PromQL.
type Query struct {
	Dashboard, Panel, RefID string
	Expr                    string // as written, with Grafana's variables
}

// dashboardJSON is what Queries reads of a dashboard.
type dashboardJSON struct {
	Panels []panelJSON `json:"panels"`
}

type panelJSON struct {
	Title   string      `json:"title"`
	Panels  []panelJSON `json:"panels"` // a collapsed row's
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
}

// Queries lists every panel target of the named dashboard, rows' panels
// included.
func Queries(name string) ([]Query, error) {
	raw, err := Read(name)
	if err != nil {
		return nil, err
	}
	var d dashboardJSON
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var out []Query
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Dashboard: name, Panel: p.Title, RefID: t.RefID, Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out, nil
}

// DefaultVariables are the dashboards' variables at their defaults, as
// the meshperf lab's Prometheus labels its targets.
var DefaultVariables = map[string]string{"pilot_job": "pilot", "proxy_job": "meshperf-proxy", "reporter": ".*"}

// Expand replaces Grafana's variables in expr: $__rate_interval by
// rateInterval, and the dashboards' own variables by vars (name to value).
// A variable it does not know is left as it is, for Prometheus to refuse.
func Expand(expr, rateInterval string, vars map[string]string) string {
	pairs := []string{"$__rate_interval", rateInterval}
	names := make([]string, 0, len(vars))
	for n := range vars {
		names = append(names, n)
	}
	// Longest first, so that $proxy_job is not read as $proxy + "_job".
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, n := range names {
		pairs = append(pairs, "${"+n+"}", vars[n], "$"+n, vars[n])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}
