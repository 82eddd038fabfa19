package results

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// graphReportRuns are an Acmeair-like graph's runs: no-mesh and
// both-sidecars, with a transaction the no-mesh run lacks.
func graphReportRuns() []Run {
	pods := []graphPod{
		{name: "a-0", appVCPU: 0.1, appMB: 20, sidecarVCPU: 0.1, sidecarMB: 30, withSidecar: true},
		{name: "b-0", appVCPU: 0.1, appMB: 10, sidecarVCPU: 0.2, sidecarMB: 25, withSidecar: true},
		{name: "b-1", appVCPU: 0.1, appMB: 15, sidecarVCPU: 0.3, sidecarMB: 40, withSidecar: true},
	}
	base := mkGraph("no-mesh", 2.0, 3.0, 5.0, 500, []graphPod{{name: "a-0", appMB: 20}, {name: "b-0", appMB: 10}, {name: "b-1", appMB: 15}})
	mesh := mkGraph("both-sidecars", 3.2, 4.6, 7.0, 400, pods)
	base.Graph.Transactions = []TransactionFigures{{Name: "QueryFlight", Count: 3000, Errors: 0, RPS: 100, Latency: Latency{P50: 0.9, P99: 4}}}
	mesh.Graph.Transactions = []TransactionFigures{
		{Name: "QueryFlight", Count: 2900, Errors: 2, RPS: 96.5, Latency: Latency{P50: 1.4, P99: 6.25}},
		{Name: "BookFlight", Count: 700, Errors: 0, RPS: 23.25, Latency: Latency{P50: 2.5, P99: 9.75}},
	}
	return []Run{base, mesh}
}

// tableRows are the text of each row of the page's tables of that class,
// cells joined by "|".
func tableRows(t *testing.T, doc, class string) []string {
	t.Helper()
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	var walk func(*html.Node, bool)
	walk = func(n *html.Node, in bool) {
		if n.Type == html.ElementNode && n.Data == "table" {
			for _, a := range n.Attr {
				if a.Key == "class" && a.Val == class {
					in = true
				}
			}
		}
		if in && n.Type == html.ElementNode && n.Data == "tr" {
			var cells []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
					var b strings.Builder
					nodeText(c, &b, "")
					cells = append(cells, b.String())
				}
			}
			rows = append(rows, strings.Join(cells, "|"))
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(root, false)
	return rows
}

func TestGraphReport(t *testing.T) {
	runs := graphReportRuns()
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, Summarize(runs)); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	wantText(t, "report", doc, "Service graph: tree-3", "<code>a</code>", "per 1000 requests per second <em>at the entrypoint</em>")

	// mode|runs|P50|P90|P99|+P50/hop|+P90/hop|+P99/hop|errors|set-up
	checkRows(t, "graph latency", tableRows(t, doc, "graph-modes")[1:],
		"no-mesh|1|2.000|3.000|5.000|-|-|-|0.50|6.0",
		"both-sidecars|1|3.200|4.600|7.000|+0.300|+0.400|+0.500|0.50|6.0")
	// mode|proxies|proxies' vCPU|per 1k entry rps|proxies' MB|control plane vCPU|MB|apps' vCPU|MB|pods|MB/pod
	checkRows(t, "graph cost", tableRows(t, doc, "graph-cost")[1:],
		"no-mesh|0|-|-|-|0.020|70.0|0.000|45.0|3|15.0",
		"both-sidecars|3|0.600|1.500|95.0|0.020|70.0|0.300|45.0|3|50.0")

	// service|replicas, then requests|errors|P50|P90|P99 per mode.
	services := tableRows(t, doc, "graph-services")
	if len(services) != 4 || services[2] != "a|1|1000|1|1.900|2.900|4.900|1000|1|3.100|4.500|6.900" ||
		services[3] != "b|2|2000|0|0.400|0.600|0.900|2000|0|0.400|0.600|0.900" {
		t.Errorf("graph services table:\n%s", strings.Join(services, "\n"))
	}

	// transaction, then P50|P99|count|errors|rps per mode; the no-mesh run
	// had no BookFlight.
	tx := tableRows(t, doc, "graph-transactions")
	if len(tx) != 4 || tx[2] != "QueryFlight|0.900|4.000|3000|0|100.0|1.400|6.250|2900|2|96.5" ||
		tx[3] != "BookFlight|-|-|-|-|-|2.500|9.750|700|0|23.2" {
		t.Errorf("graph transactions table:\n%s", strings.Join(tx, "\n"))
	}

	kinds := countKinds(figures(t, doc))
	for _, k := range []string{"graph-latency", "graph-mesh-cpu", "graph-service-p50"} {
		if kinds[k] != 1 {
			t.Errorf("%d %s charts, want 1 (all: %v)", kinds[k], k, kinds)
		}
	}
	for _, f := range figures(t, doc) {
		if f.kind == "graph-mesh-cpu" && (len(f.series) != 1 || f.series[0] != "both-sidecars" || !strings.Contains(f.text, "1.500")) {
			t.Errorf("mesh vCPU chart: series %v, text %q", f.series, f.text)
		}
		if f.kind == "graph-service-p50" && !strings.Contains(f.text, "3.10") {
			t.Errorf("service P50 chart lacks a's 3.10 ms: %q", f.text)
		}
	}
}

func checkRows(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s table:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
