package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// The figures of a subject in a case, by the name ratios and the JSON key
// them with.
const (
	figRPS         = "rps"
	figVCPU        = "vcpu-per-1k"
	figUser        = "user-vcpu-per-1k"
	figSystem      = "system-vcpu-per-1k"
	figRSS         = "rss-mb"
	figP50         = "p50"
	figP90         = "p90"
	figP99         = "p99"
	figP999        = "p99.9"
	figAddedP50    = "added-p50"
	figAddedP90    = "added-p90"
	figAddedP99    = "added-p99"
	figAddedP999   = "added-p99.9"
	figSyscalls    = "syscalls-per-request"
	figVoluntary   = "voluntary-switches-per-request"
	figInvoluntary = "involuntary-switches-per-request"
	figAllocations = "allocations-per-request"
)

// RSSGoalMB is the absolute goal for meshperf-proxy's resident
// memory on one hop.
const RSSGoalMB = 12

// ProxyReport is a bench proxy invocation: each case's medians and ratios
// (-json writes it whole).
type ProxyReport struct {
	Bench         string            `json:"bench"`
	RunID         string            `json:"run_id"`
	Machine       results.Machine   `json:"machine"`
	Meshperf      results.Build     `json:"meshperf"`
	MeshperfProxy results.Component `json:"meshperf_proxy"`
	HAProxy       results.Component `json:"haproxy"`
	Threads       int               `json:"threads"`
	Repeats       int               `json:"repeats"`
	Duration      string            `json:"duration"`
	Notes         []string          `json:"notes,omitempty"`
	Cases         []ProxyCase       `json:"cases"`
	Runs          []results.Run     `json:"-"`
}

// ProxyCase is one case, protocol and rate: every subject's medians over
// the rounds and the ratios ours/HAProxy.
type ProxyCase struct {
	Case        string           `json:"case"`
	Protocol    string           `json:"protocol"`
	QPS         int              `json:"qps"`
	Connections int              `json:"connections"`
	Size        int              `json:"size"`
	Subjects    []SubjectMedians `json:"subjects"`
	Ratios      []Ratio          `json:"ratios"`

	samples map[string]map[string]Samples // subject, figure: one value per round
	rounds  int
}

// SubjectMedians are one subject's medians in a case, by figure; a figure
// not measured is absent.
type SubjectMedians struct {
	Subject string             `json:"subject"`
	Mode    string             `json:"mode"`
	Medians map[string]float64 `json:"medians"`
	CV      map[string]float64 `json:"cv"`
}

func newProxyCase(caseName string, p scenario.Protocol, qps int, cfg ProxyConfig) *ProxyCase {
	return &ProxyCase{Case: caseName, Protocol: string(p), QPS: qps, Connections: cfg.Connections, Size: cfg.Size,
		samples: map[string]map[string]Samples{}, rounds: cfg.Repeats}
}

// add records a subject's figures of one round.
func (c *ProxyCase) add(subject string, round int, f runFigures) {
	m := c.samples[subject]
	if m == nil {
		m = map[string]Samples{}
		c.samples[subject] = m
	}
	set := func(name string, v float64) {
		s := m[name]
		for len(s) < c.rounds {
			s = append(s, math.NaN())
		}
		s[round-1] = v
		m[name] = s
	}
	set(figRPS, f.RPS)
	set(figP50, f.P50)
	set(figP90, f.P90)
	set(figP99, f.P99)
	set(figP999, f.P999)
	if subject == SubjectNoProxy {
		return
	}
	set(figVCPU, f.per1k(f.VCPU))
	set(figUser, f.per1k(f.UserVCPU))
	set(figSystem, f.per1k(f.SysCPU))
	set(figRSS, f.RSSMB)
	set(figSyscalls, f.Syscalls)
	set(figVoluntary, f.Voluntary)
	set(figInvoluntary, f.Involuntary)
	set(figAllocations, f.Allocations)
}

// finish takes each proxy's added latency against the no-proxy run of the
// same round, the medians, and the ratios ours/HAProxy with the issue's
// goals as targets.
func (c *ProxyCase) finish() ProxyCase {
	base := c.samples[SubjectNoProxy]
	for _, name := range []string{SubjectMeshperf, SubjectHAProxy} {
		m := c.samples[name]
		if m == nil {
			continue
		}
		for _, pair := range [][2]string{{figAddedP50, figP50}, {figAddedP90, figP90}, {figAddedP99, figP99}, {figAddedP999, figP999}} {
			added := make(Samples, c.rounds)
			for i := range added {
				added[i] = at(m[pair[1]], i) - at(base[pair[1]], i)
			}
			m[pair[0]] = added
		}
	}
	for _, name := range []string{SubjectNoProxy, SubjectMeshperf, SubjectHAProxy} {
		m := c.samples[name]
		if m == nil {
			continue
		}
		sm := SubjectMedians{Subject: name, Mode: modeName(name, c.Case, scenario.Protocol(c.Protocol)), Medians: map[string]float64{}, CV: map[string]float64{}}
		for fig, s := range m {
			if v := s.Median(); !math.IsNaN(v) {
				sm.Medians[fig] = v
			}
			if cv := s.CV(); !math.IsNaN(cv) {
				sm.CV[fig] = cv
			}
		}
		c.Subjects = append(c.Subjects, sm)
	}
	ours, peer := c.samples[SubjectMeshperf], c.samples[SubjectHAProxy]
	for _, r := range c.ratioSpecs() {
		ratio := NewRatio(c.key(r.fig), ours[r.fig], peer[r.fig], r.fig == figRPS, r.target)
		// An added latency HAProxy's run measured as nothing or less (its
		// run beat the no-proxy one of its round: noise) gives no scale to
		// hold ours against; a negative ratio would read as a win.
		if ratio.Peer <= 0 {
			ratio.Value = math.NaN()
		}
		c.Ratios = append(c.Ratios, ratio)
	}
	return *c
}

func at(s Samples, i int) float64 {
	if i < len(s) {
		return s[i]
	}
	return math.NaN()
}

// key names a figure of this case in ratios and baselines:
// "plaintext http 1000qps vcpu-per-1k", "mtls h2 max rps".
func (c *ProxyCase) key(fig string) string {
	rate := "max"
	if c.QPS > 0 {
		rate = fmt.Sprintf("%dqps", c.QPS)
	}
	return fmt.Sprintf("%s %s %s %s", c.Case, c.Protocol, rate, fig)
}

type ratioSpec struct {
	fig    string
	target float64
}

// ratioSpecs are the figures compared, with the goals: one hop
// plaintext at 1000 qps, CPU per 1000 rps <= 0.9x, added P90 <= 1.0x,
// added P99 <= 1.5x; its maximum rate >= 1.0x; mTLS at 1000 qps, CPU per
// proxy <= 1.0x, added P99 <= 1.5x.
func (c *ProxyCase) ratioSpecs() []ratioSpec {
	var cpu, p90, p99, rate float64
	switch {
	case c.Case == CasePlaintext && c.QPS == 1000:
		cpu, p90, p99 = 0.9, 1.0, 1.5
	case c.Case == CasePlaintext && c.QPS == 0:
		rate = 1.0
	case c.Case == CaseMTLS && c.QPS == 1000:
		cpu, p99 = 1.0, 1.5
	}
	specs := []ratioSpec{{figVCPU, cpu}, {figAddedP50, 0}, {figAddedP90, p90}, {figAddedP99, p99}, {figAddedP999, 0},
		{figRSS, 0}, {figSyscalls, 0}, {figVoluntary, 0}, {figInvoluntary, 0}}
	if c.QPS == 0 {
		specs = append([]ratioSpec{{figRPS, rate}}, specs...)
	}
	return specs
}

// Ratios are every case's ratios, for the baseline and its check.
func (r *ProxyReport) Ratios() []Ratio {
	var out []Ratio
	for _, c := range r.Cases {
		out = append(out, c.Ratios...)
	}
	return out
}

func (r *ProxyReport) allocationsKnown() bool {
	for _, c := range r.Cases {
		for _, s := range c.Subjects {
			if _, ok := s.Medians[figAllocations]; ok {
				return true
			}
		}
	}
	return false
}

var protocolNames = map[string]string{"http": "HTTP/1.1", "h2": "HTTP/2 (h2c)"}

// Title is the case's heading.
func (c ProxyCase) Title(repeats int) string {
	what := "plaintext one hop"
	if c.Case == CaseMTLS {
		what = "mTLS between two proxies"
	}
	rate := fmt.Sprintf("%d qps", c.QPS)
	if c.QPS == 0 {
		rate = "max rate"
	}
	return fmt.Sprintf("%s, %s, %s, %d connections, %s (%d runs, medians)", what, protocolNames[c.Protocol], rate, c.Connections, sizeText(c.Size), repeats)
}

func sizeText(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%d kB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}

// WriteTable prints the report: a table per case, each subject's medians,
// then the ratios ours/HAProxy with their goals.
func (r *ProxyReport) WriteTable(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "meshperf bench proxy: meshperf-proxy %s against HAProxy %s, both with %d worker threads (--concurrency %d, nbthread %d): equal footing\n",
		r.MeshperfProxy.Version, r.HAProxy.Version, r.Threads, r.Threads, r.Threads)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, c := range r.Cases {
		b.WriteString("\n" + c.Title(r.Repeats) + "\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "proxy\trps\tvCPU/1k rps (user+sys)\tRSS MB\tP50/P90/P99/P99.9 ms\tadded P50/P90/P99/P99.9 ms\tsyscalls/req\tswitches/req (vol/invol)\tallocs/req")
		for _, s := range c.Subjects {
			m := func(fig string, decimals int) string { return num(s.Medians, fig, decimals) }
			cpu, added := "-", "-"
			if s.Subject != SubjectNoProxy {
				cpu = fmt.Sprintf("%s (%s+%s)", m(figVCPU, 3), m(figUser, 3), m(figSystem, 3))
				added = strings.Join([]string{m(figAddedP50, 3), m(figAddedP90, 3), m(figAddedP99, 3), m(figAddedP999, 3)}, "/")
			}
			switches := "-"
			if s.Subject != SubjectNoProxy {
				switches = m(figVoluntary, 2) + "/" + m(figInvoluntary, 2)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Subject, m(figRPS, 0), cpu, m(figRSS, 1),
				strings.Join([]string{m(figP50, 3), m(figP90, 3), m(figP99, 3), m(figP999, 3)}, "/"), added,
				m(figSyscalls, 1), switches, m(figAllocations, 1))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		c.writeRatios(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var figureNames = map[string]string{figRPS: "rate", figVCPU: "vCPU/1k rps", figAddedP50: "added P50", figAddedP90: "added P90",
	figAddedP99: "added P99", figAddedP999: "added P99.9", figRSS: "RSS", figSyscalls: "syscalls/req",
	figVoluntary: "voluntary switches/req", figInvoluntary: "involuntary switches/req"}

func (c ProxyCase) writeRatios(b *strings.Builder) {
	var parts []string
	for _, r := range c.Ratios {
		name := figureNames[strings.TrimPrefix(r.Key, c.key(""))]
		parts = append(parts, name+" "+r.String())
	}
	fmt.Fprintf(b, "ratio ours/haproxy: %s\n", strings.Join(parts, "; "))
	if c.Case == CasePlaintext && c.QPS == 1000 {
		for _, s := range c.Subjects {
			if v, ok := s.Medians[figRSS]; ok && s.Subject == SubjectMeshperf {
				verdict := "met"
				if v > RSSGoalMB {
					verdict = "missed"
				}
				fmt.Fprintf(b, "meshperf-proxy RSS %.1f MB (goal <= %d MB: %s)\n", v, RSSGoalMB, verdict)
			}
		}
	}
}

func num(m map[string]float64, fig string, decimals int) string {
	v, ok := m[fig]
	if !ok {
		return "n/a"
	}
	return fmt.Sprintf("%.*f", decimals, v)
}
