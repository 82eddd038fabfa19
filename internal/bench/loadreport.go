package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// LoadCase is one rate's generators, each with its figures' medians over
// the rounds.
type LoadCase struct {
	Rate       int             `json:"rate"` // 0: flat out
	Generators []LoadGenerator `json:"generators"`
}

// LoadGenerator is one generator's figures in one case.
type LoadGenerator struct {
	Name string `json:"name"`
	Runs int    `json:"runs"`
	// Corrected says its latencies are corrected for coordinated
	// omission (meshperf load at a fixed rate); Fortio's and wrk's are
	// not, so their percentiles are lower than what a user of the
	// service would have seen whenever a call ran late.
	Corrected bool `json:"corrected"`
	// Figures are by loadFigures' keys.
	Figures map[string]Figure `json:"figures"`
	samples map[string]Samples
}

// Figure is a figure's median over the rounds and how much they
// disagreed.
type Figure struct {
	Median float64 `json:"median"`
	CV     float64 `json:"cv"`
}

// loadFigure is a figure the load benchmark gives each generator.
type loadFigure struct {
	key   string
	value func(m *LoadMeasure) float64
}

var loadFigures = []loadFigure{
	{"rate_rps", func(m *LoadMeasure) float64 { return m.ActualQPS }},
	{"cpu_us_per_request", (*LoadMeasure).CPUPerRequest},
	{"user_us_per_request", func(m *LoadMeasure) float64 { return 1e6 * perRequest(m.UserCPU.Seconds(), m.Calls) }},
	{"system_us_per_request", func(m *LoadMeasure) float64 { return 1e6 * perRequest(m.SystemCPU.Seconds(), m.Calls) }},
	{"rss_mb", func(m *LoadMeasure) float64 { return float64(m.MaxRSS) / (1 << 20) }},
	{"syscalls_per_request", func(m *LoadMeasure) float64 { return perRequest(m.Syscalls, m.Calls) }},
	{"voluntary_switches_per_request", func(m *LoadMeasure) float64 { return perRequest(float64(m.VoluntarySwitches), m.Calls) }},
	{"involuntary_switches_per_request", func(m *LoadMeasure) float64 { return perRequest(float64(m.InvoluntarySwitches), m.Calls) }},
	{"p50_ms", func(m *LoadMeasure) float64 { return m.Run.Latency.P50 }},
	{"p90_ms", func(m *LoadMeasure) float64 { return m.Run.Latency.P90 }},
	{"p99_ms", func(m *LoadMeasure) float64 { return m.Run.Latency.P99 }},
	{"errors", func(m *LoadMeasure) float64 { return float64(m.Errors) }},
	{"server_vcpu", func(m *LoadMeasure) float64 { return m.Server.VCPU }},
	{"server_us_per_request", func(m *LoadMeasure) float64 { return 1e6 * perRequest(m.Server.CPU.Seconds(), m.Calls) }},
}

// summarize turns the measures into cases, medians and ratios.
func (rep *LoadReport) summarize(o LoadOptions) {
	for _, rate := range o.Rates {
		c := LoadCase{Rate: rate}
		for _, gen := range generatorsFor(o, rate) {
			g := LoadGenerator{Name: gen, Figures: map[string]Figure{}, samples: map[string]Samples{}, Corrected: true}
			for _, m := range rep.Measures {
				if m.Rate != rate || m.Generator != gen {
					continue
				}
				g.Runs++
				g.Corrected = g.Corrected && m.Run.Corrected
				for _, f := range loadFigures {
					g.samples[f.key] = append(g.samples[f.key], f.value(m))
				}
			}
			g.Corrected = g.Corrected && g.Runs > 0
			for key, s := range g.samples {
				g.Figures[key] = Figure{Median: s.Median(), CV: s.CV()}
			}
			c.Generators = append(c.Generators, g)
		}
		rep.Cases = append(rep.Cases, c)
		rep.Ratios = append(rep.Ratios, c.ratios()...)
	}
	if o.Fortio == "" {
		rep.Notes = append(rep.Notes, "fortio: not run (no -fortio, none in bin/tools or on PATH): "+FortioPeer.Install)
	}
	switch {
	case o.Wrk == "":
		rep.Notes = append(rep.Notes, "wrk: not run (no -wrk, none on PATH): "+WrkPeer.Install)
	case len(o.Rates) > 0:
		rep.Notes = append(rep.Notes, "wrk runs only flat out (-qps 0): it has no fixed rate (wrk2 has)")
	}
	if o.Perf == "" {
		rep.Notes = append(rep.Notes, "syscalls per request: not counted (perf not found: apt-get install linux-perf)")
	}
}

func (c LoadCase) generator(name string) (LoadGenerator, bool) {
	for _, g := range c.Generators {
		if g.Name == name {
			return g, true
		}
	}
	return LoadGenerator{}, false
}

// ratios are ours against each peer in the case: CPU per request against
// Fortio at a fixed rate (the goal: at most half), and flat out
// the rate against wrk (the goal: at least wrk's) with CPU per request
// beside it, and both against Fortio without a goal.
func (c LoadCase) ratios() []Ratio {
	ours, ok := c.generator(GeneratorMeshperf)
	if !ok {
		return nil
	}
	var out []Ratio
	ratio := func(peer, figure string, higherIsBetter bool, target float64) {
		p, ok := c.generator(peer)
		if !ok {
			return
		}
		key := fmt.Sprintf("http1 %s %s vs %s", caseName(c.Rate), ratioNames[figure], peer)
		out = append(out, NewRatio(key, ours.samples[figure], p.samples[figure], higherIsBetter, target))
	}
	if c.Rate > 0 {
		ratio(GeneratorFortio, "cpu_us_per_request", false, LoadCPUTarget)
		return out
	}
	ratio(GeneratorWrk, "rate_rps", true, LoadMaxRateTarget)
	ratio(GeneratorWrk, "cpu_us_per_request", false, 0)
	ratio(GeneratorFortio, "rate_rps", true, 0)
	ratio(GeneratorFortio, "cpu_us_per_request", false, 0)
	return out
}

// ratioNames name the figures in ratio keys.
var ratioNames = map[string]string{"cpu_us_per_request": "cpu-per-request", "rate_rps": "rate"}

// loadRows are the table's rows: a title and how to print a generator's
// figure in it.
var loadRows = []struct {
	title string
	cell  func(g LoadGenerator) string
}{
	{"rate achieved (rps)", func(g LoadGenerator) string { return g.num("rate_rps", 0) }},
	{"CPU per request (µs)", func(g LoadGenerator) string { return g.num("cpu_us_per_request", 1) }},
	{"  user / system (µs)", func(g LoadGenerator) string {
		return g.num("user_us_per_request", 1) + " / " + g.num("system_us_per_request", 1)
	}},
	{"RSS, peak (MB)", func(g LoadGenerator) string { return g.num("rss_mb", 1) }},
	{"syscalls per request", func(g LoadGenerator) string { return g.num("syscalls_per_request", 2) }},
	{"switches per request (vol / invol)", func(g LoadGenerator) string {
		return g.num("voluntary_switches_per_request", 2) + " / " + g.num("involuntary_switches_per_request", 3)
	}},
	{"latency P50 / P90 / P99 (ms)", func(g LoadGenerator) string {
		return g.num("p50_ms", 3) + " / " + g.num("p90_ms", 3) + " / " + g.num("p99_ms", 3)
	}},
	{"  coordinated omission", func(g LoadGenerator) string {
		if g.Corrected {
			return "corrected"
		}
		return "not corrected"
	}},
	{"errors", func(g LoadGenerator) string { return g.num("errors", 0) }},
	{"echo server vCPU", func(g LoadGenerator) string { return g.num("server_vcpu", 2) }},
	{"echo server CPU per request (µs)", func(g LoadGenerator) string { return g.num("server_us_per_request", 1) }},
}

// num is a figure's median with prec decimals, "~" after it when its
// repeats disagree beyond NoisyCV, "-" when unknown.
func (g LoadGenerator) num(key string, prec int) string {
	s := g.samples[key]
	m := s.Median()
	if math.IsNaN(m) {
		return "-"
	}
	out := fmt.Sprintf("%.*f", prec, m)
	if s.Noisy() {
		out += "~"
	}
	return out
}

// WriteTable prints a table per case, each generator's medians side by
// side, and the ratios under it.
func (rep *LoadReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "meshperf bench load: %d connections, HTTP/1.1, %d-byte responses, %s runs, %d rounds interleaved, medians (~: the rounds disagree beyond a CV of %.0f%%)\n",
		rep.Connections, rep.Size, rep.Duration, rep.Repeats, 100*NoisyCV)
	for _, c := range rep.Cases {
		title := fmt.Sprintf("%d qps", c.Rate)
		if c.Rate == 0 {
			title = "maximum rate (-qps 0)"
		}
		fmt.Fprintf(&b, "\n%s\n", title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		width := 0
		for _, row := range loadRows {
			width = max(width, len([]rune(row.title)))
		}
		fmt.Fprintf(tw, "  %-*s\t", width, "")
		for _, g := range c.Generators {
			fmt.Fprintf(tw, "%s\t", g.Name)
		}
		fmt.Fprintln(tw)
		for _, row := range loadRows {
			fmt.Fprintf(tw, "  %-*s\t", width, row.title)
			for _, g := range c.Generators {
				fmt.Fprintf(tw, "%s\t", row.cell(g))
			}
			fmt.Fprintln(tw)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, r := range rep.Ratios {
			if strings.HasPrefix(r.Key, "http1 "+caseName(c.Rate)+" ") {
				fmt.Fprintf(&b, "  ours/%s %s: %s\n", r.Key[strings.LastIndex(r.Key, " ")+1:], ratioFigure(r.Key), r)
			}
		}
	}
	b.WriteString("\nCPU is each generator's whole life (start-up included) per call it made; the echo server's is over the\n" +
		"same time. Latencies are as each generator reports them: only meshperf load corrects for coordinated\n" +
		"omission, so its P99 at a fixed rate is not comparable with Fortio's or wrk's. Flat out, the one echo\n" +
		"server is the bottleneck every generator shares: its vCPU says how close to it each came.\n")
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ratioFigure is the figure a ratio key names: "cpu-per-request" in
// "http1 1000qps cpu-per-request vs fortio".
func ratioFigure(key string) string {
	f := strings.Fields(key)
	if len(f) < 3 {
		return key
	}
	return strings.ReplaceAll(f[2], "cpu-per-request", "CPU per request")
}
