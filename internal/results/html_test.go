package results

import (
	"bytes"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// reportRuns is a small matrix: connections 2 and 8 at 500 and 1000 qps,
// no-mesh and both-sidecars, plus one failed run.
func reportRuns() []Run {
	var runs []Run
	t0 := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	for _, mode := range []string{"no-mesh", "both-sidecars"} {
		for _, c := range []int{2, 8} {
			for _, q := range []int{500, 1000} {
				add := 0.0
				var vcpu, mb []float64
				if mode != "no-mesh" {
					add, vcpu, mb = 0.2, []float64{0.05 * float64(q) / 500, 0.06 * float64(q) / 500}, []float64{12, 13}
				}
				r := mk(mode, c, q, 0.2+add+0.01*float64(c), 0.3+add, 0.5+add, float64(q), vcpu, mb)
				r.Label = "r1_qps_" + QPSText(q) + "_c_" + QPSText(c) + "_1024_" + mode
				r.StartTime = t0.Add(time.Duration(len(runs)) * time.Minute)
				r.Scenario, r.Corrected = "demo", true
				runs = append(runs, r)
			}
		}
	}
	bad := mk("both-sidecars", 8, 1000, 0, 0, 0, 0, nil, nil)
	bad.Label, bad.Failed, bad.FailureReason = "r1_failed<&>", true, "server-sidecar exited: signal: killed"
	return append(runs, bad)
}

func TestWriteHTML(t *testing.T) {
	runs := reportRuns()
	s := Summarize(runs)
	s.Machine = Machine{CPUs: 2, Kernel: "Linux 6.1-test"}
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, s); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	// Each of the 4 points: added latency, CPU and memory per proxy (these
	// runs have no spectrum). Then 3 latency charts per qps value (2)
	// against connections, 3 per connection count (2) against rate, CPU
	// and memory per connection count (2) against rate.
	wantKinds := map[string]int{"added-latency": 4, "proxy-cpu": 4, "proxy-memory": 4, "against-connections": 6, "against-rate": 10}
	if got := countKinds(figures(t, doc)); !maps.Equal(got, wantKinds) {
		t.Errorf("charts by kind %v, want %v", got, wantKinds)
	}
	for _, want := range []string{
		"<title>meshperf lab: demo</title>", "2 CPUs, Linux 6.1-test", "2026-05-06 07:08 UTC", "netns: each pod in its own network namespace",
		`<table id="summary">`, `<table id="runs">`, "P90 latency, at 500 qps", "CPU per proxy, 2 connections",
		"Memory per proxy (MB (RSS))", "connections", "requested rate (qps)", "both-sidecars",
		`<span class="flag">FAILED</span>: server-sidecar exited: signal: killed`, "r1_failed&lt;&amp;&gt;",
		"&#43;0.200", // html/template writes '+' as &#43;
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, banned := range []string{"<script", "<link", "http://fonts", "src=\"http", "@import", "<?xml"} {
		if strings.Contains(doc, banned) {
			t.Errorf("report is not self-contained: has %q", banned)
		}
	}
}

func TestWriteHTMLSingleAxis(t *testing.T) {
	var runs []Run
	for _, q := range []int{500, 750, 1000} {
		runs = append(runs, mk("no-mesh", 4, q, 0.2, 0.3, 0.4, float64(q), nil, nil),
			mk("both-sidecars", 4, q, 0.4, 0.5, 0.6, float64(q), []float64{0.1, 0.1}, []float64{10, 10}))
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, runs, Summarize(runs)); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	checkWellFormed(t, doc)
	// Per point (3 rates): added latency, CPU, memory; against rate: 3
	// latency charts and CPU and memory. No connection axis, and no
	// placeholder for it.
	wantKinds := map[string]int{"added-latency": 3, "proxy-cpu": 3, "proxy-memory": 3, "against-rate": 5}
	if got := countKinds(figures(t, doc)); !maps.Equal(got, wantKinds) {
		t.Errorf("charts by kind %v, want %v", got, wantKinds)
	}
	if strings.Contains(doc, "Latency against connections") || strings.Contains(doc, "No chart") {
		t.Error("the page has a section for an axis the runs do not have")
	}
}

// checkWellFormed tokenizes the page and checks that every element opened
// is closed in order (void elements excepted) and that the parser sees the
// charts inside the body.
func checkWellFormed(t *testing.T, doc string) {
	t.Helper()
	void := map[string]bool{"meta": true, "br": true, "img": true, "hr": true, "input": true, "link": true}
	z := html.NewTokenizer(strings.NewReader(doc))
	var stack []string
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() != io.EOF {
				t.Fatalf("tokenize: %v", z.Err())
			}
			break
		}
		name, _ := z.TagName()
		switch tt {
		case html.StartTagToken:
			if !void[string(name)] {
				stack = append(stack, string(name))
			}
		case html.EndTagToken:
			if len(stack) == 0 || stack[len(stack)-1] != string(name) {
				t.Fatalf("</%s> closes %v", name, stack)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed elements %v", stack)
	}
	root, err := html.Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var svgs int
	var walk func(*html.Node, bool)
	walk = func(n *html.Node, inBody bool) {
		if n.Type == html.ElementNode && n.Data == "svg" && inBody {
			svgs++
		}
		inBody = inBody || (n.Type == html.ElementNode && n.Data == "body")
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, inBody)
		}
	}
	walk(root, false)
	if svgs != strings.Count(doc, "<svg ") {
		t.Errorf("parser found %d svg elements in the body, text has %d", svgs, strings.Count(doc, "<svg "))
	}
}
