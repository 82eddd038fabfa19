package results

import (
	"fmt"
	"html/template"
	"math"
)

// The report's part for runs over a service graph: per point, the modes'
// end-to-end latency with the added latency per hop, the whole mesh's
// cost, each service's and (for Acmeair) each transaction's figures per
// mode side by side, and their charts. A two-pod report has none of it.

// graphPoint is one point's graph tables for the page.
type graphPoint struct {
	Point        Point
	Modes        []ModeResult // the modes that ran over the graph
	Services     []graphRow
	Transactions []graphRow
}

// graphRow is one service's or transaction's figures, one cell per mode
// of graphPoint.Modes (Has false where the mode had none).
type graphRow struct {
	Name     string
	Replicas int
	Cells    []graphCell
}

type graphCell struct {
	Has           bool
	Count, Errors int64
	RPS           float64
	P50, P90, P99 float64
}

// graphPoints are the points at which some mode ran over a graph.
func graphPoints(s Summary) []graphPoint {
	var out []graphPoint
	for _, p := range s.Points {
		gp := graphPoint{Point: p}
		for _, m := range p.Modes {
			if m.Graph != nil {
				gp.Modes = append(gp.Modes, m)
			}
		}
		if len(gp.Modes) == 0 {
			continue
		}
		gp.Services = graphRows(gp.Modes, func(g *GraphFigures) []graphRow {
			var rows []graphRow
			for _, sf := range g.Services {
				l := sf.Latency
				rows = append(rows, graphRow{Name: sf.Name, Replicas: sf.Replicas, Cells: []graphCell{{Has: true,
					Count: sf.Requests, Errors: sf.Errors, RPS: math.NaN(), P50: l.P50, P90: l.P90, P99: l.P99}}})
			}
			return rows
		})
		gp.Transactions = graphRows(gp.Modes, func(g *GraphFigures) []graphRow {
			var rows []graphRow
			for _, tf := range g.Transactions {
				l := tf.Latency
				rows = append(rows, graphRow{Name: tf.Name, Cells: []graphCell{{Has: true,
					Count: tf.Count, Errors: tf.Errors, RPS: tf.RPS, P50: l.P50, P90: l.P90, P99: l.P99}}})
			}
			return rows
		})
		out = append(out, gp)
	}
	return out
}

// graphRows lays each mode's rows (one cell each) side by side: a row per
// name in the order first seen, a cell per mode.
func graphRows(modes []ModeResult, rowsOf func(*GraphFigures) []graphRow) []graphRow {
	var out []graphRow
	at := map[string]int{}
	for i, m := range modes {
		for _, r := range rowsOf(m.Graph) {
			j, ok := at[r.Name]
			if !ok {
				j = len(out)
				at[r.Name] = j
				cells := make([]graphCell, len(modes))
				for k := range cells {
					cells[k] = graphCell{RPS: math.NaN(), P50: math.NaN(), P90: math.NaN(), P99: math.NaN()}
				}
				out = append(out, graphRow{Name: r.Name, Cells: cells})
			}
			out[j].Replicas = max(out[j].Replicas, r.Replicas)
			out[j].Cells[i] = r.Cells[0]
		}
	}
	return out
}

// graphSections are the charts of each point's graph runs: end-to-end
// percentiles per mode, the mesh's vCPU per 1000 rps at the entrypoint,
// and each service's P50 per mode.
func graphSections(gps []graphPoint) ([]section, error) {
	var out []section
	for _, gp := range gps {
		sec := section{Heading: "Service graph at " + pointText(gp.Point)}
		var lat, svc, cost []barSet
		var costNames []string
		for _, m := range gp.Modes {
			lat = append(lat, barSet{mode: m.Mode, values: []float64{m.P50, m.P90, m.P99}})
			if !math.IsNaN(m.Graph.MeshVCPUPer1000RPS) {
				cost = append(cost, barSet{mode: m.Mode, at: len(costNames), values: []float64{m.Graph.MeshVCPUPer1000RPS}})
				costNames = append(costNames, m.Mode)
			}
		}
		var services []string
		for _, r := range gp.Services {
			services = append(services, r.Name)
		}
		for i, m := range gp.Modes {
			v := make([]float64, len(gp.Services))
			for j, r := range gp.Services {
				v[j] = math.NaN()
				if c := r.Cells[i]; c.Has {
					v[j] = c.P50
				}
			}
			svc = append(svc, barSet{mode: m.Mode, values: v})
		}
		for _, c := range []struct {
			kind, title, yLabel, format string
			categories                  []string
			sets                        []barSet
		}{
			{"graph-latency", "End-to-end latency at the entrypoint", "latency (ms)", "%.2f", []string{"P50", "P90", "P99"}, lat},
			{"graph-mesh-cpu", "All proxies' vCPU per 1000 rps at the entrypoint", "vCPU per 1000 entry rps", "%.3f", costNames, cost},
			{"graph-service-p50", "P50 latency of each service", "P50 (ms)", "%.2f", services, svc},
		} {
			if len(c.sets) == 0 || len(c.categories) == 0 {
				continue
			}
			ch, err := barChart(c.title+", "+pointText(gp.Point), c.yLabel, c.categories, c.sets, c.format)
			if err != nil {
				return nil, err
			}
			ch.Kind = c.kind
			sec.Charts = append(sec.Charts, ch)
		}
		out = append(out, sec)
	}
	return out, nil
}

// cellCount writes a cell's count, "-" where the mode had no such row.
func cellCount(c graphCell, v int64) string {
	if !c.Has {
		return "-"
	}
	return fmt.Sprint(v)
}

// The report's graph part, which "body" executes with the page.
var _ = template.Must(pageTemplate.New("graph").Funcs(template.FuncMap{"cellCount": cellCount}).Parse(`{{with .Summary.Graph}}
<h2>Service graph: {{.Workload}}</h2>
<p>The load went to <code>{{.Entrypoint}}</code>, so latency is end to end there, through {{.Pods}} pods and at most {{.Hops}} pod-to-pod hops (the load generator's hop to the entrypoint counted). Added latency per hop is the added latency against no-mesh divided by those hops. The mesh's cost is every proxy of the graph summed (sidecars, node proxies, waypoint), and per 1000 requests per second <em>at the entrypoint</em>: one request there fans out into a request at every hop, all of it counted. Memory is the proportional set (PSS: pages shared between processes, as the one binary every app or proxy maps, count once across them, so the sums are what the graph really takes; RSS where PSS could not be read); a pod's is its app's and its sidecar's, the median over pods. Medians over repetitions.</p>
{{end}}{{range $gp := .Graph}}{{$p := .Point}}
<h3>At {{$p.Connections}} connections, {{qps $p.QPS}} qps</h3>
<div class="scroll"><table class="graph-modes">
<thead><tr><th class="l">mode</th><th>runs</th><th>P50 (ms)</th><th>P90 (ms)</th><th>P99 (ms)</th><th>+P50 / hop (ms)</th><th>+P90 / hop (ms)</th><th>+P99 / hop (ms)</th><th>errors (%)</th><th>set-up (s)</th></tr></thead>
<tbody>
{{range .Modes}}{{$g := .Graph}}<tr><td class="l">{{.Mode}}</td><td>{{.Runs}}</td><td>{{f3 .P50}}</td><td>{{f3 .P90}}</td><td>{{f3 .P99}}</td><td>{{added . $g.AddedPerHopP50}}</td><td>{{added . $g.AddedPerHopP90}}</td><td>{{added . $g.AddedPerHopP99}}</td><td>{{pct $g.ErrorPercent}}</td><td>{{f1 $g.SetupSeconds}}</td></tr>
{{end}}</tbody></table></div>
<p>What the whole mesh costs, against what the graph's apps do:</p>
<div class="scroll"><table class="graph-cost">
<thead><tr><th class="l">mode</th><th>proxies</th><th>proxies' vCPU</th><th>vCPU / 1k rps at the entrypoint</th><th>proxies' MB</th><th>control plane vCPU</th><th>control plane MB</th><th>apps' vCPU</th><th>apps' MB</th><th>pods</th><th>MB / pod</th></tr></thead>
<tbody>
{{range .Modes}}{{$g := .Graph}}<tr><td class="l">{{.Mode}}</td><td>{{$g.Proxies}}</td><td>{{f3 $g.MeshVCPU}}</td><td>{{f3 $g.MeshVCPUPer1000RPS}}</td><td>{{f1 $g.MeshMB}}</td><td>{{f3 $g.ControlPlaneVCPU}}</td><td>{{f1 $g.ControlPlaneMB}}</td><td>{{f3 $g.AppsVCPU}}</td><td>{{f1 $g.AppsMB}}</td><td>{{$g.Pods}}</td><td>{{f1 $g.MBPerPod}}</td></tr>
{{end}}</tbody></table></div>
{{with .Services}}<p>Each service, as its own duration histogram counts it (its calls to others included), summed over its replicas:</p>
<div class="scroll"><table class="graph-services">
<thead><tr><th class="l" rowspan="2">service</th><th rowspan="2">replicas</th>{{range $gp.Modes}}<th colspan="5">{{.Mode}}</th>{{end}}</tr>
<tr>{{range $gp.Modes}}<th>requests</th><th>errors</th><th>P50 (ms)</th><th>P90 (ms)</th><th>P99 (ms)</th>{{end}}</tr></thead>
<tbody>
{{range .}}<tr><td class="l">{{.Name}}</td><td>{{.Replicas}}</td>{{range .Cells}}<td>{{cellCount . .Count}}</td><td>{{cellCount . .Errors}}</td><td>{{f3 .P50}}</td><td>{{f3 .P90}}</td><td>{{f3 .P99}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
<p class="note">A service's percentiles are read from its histogram's buckets, so they are as coarse as the buckets; "-" where it served nothing.</p>
{{end}}{{with .Transactions}}<p>Each transaction of the driver's mix:</p>
<div class="scroll"><table class="graph-transactions">
<thead><tr><th class="l" rowspan="2">transaction</th>{{range $gp.Modes}}<th colspan="5">{{.Mode}}</th>{{end}}</tr>
<tr>{{range $gp.Modes}}<th>P50 (ms)</th><th>P99 (ms)</th><th>count</th><th>errors</th><th>rps</th>{{end}}</tr></thead>
<tbody>
{{range .}}<tr><td class="l">{{.Name}}</td>{{range .Cells}}<td>{{f3 .P50}}</td><td>{{f3 .P99}}</td><td>{{cellCount . .Count}}</td><td>{{cellCount . .Errors}}</td><td>{{f1 .RPS}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
{{end}}{{end}}`))
