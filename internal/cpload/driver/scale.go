package driver

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
)

// ScaleStep is one size of a scale run: its report and the figures per
// proxy and per service that show how the control plane's cost grows.
type ScaleStep struct {
	Multiple int     `json:"multiple"` // of the first step's namespaces
	Proxies  int     `json:"proxies"`
	Services int     `json:"services"`
	SyncedMs float64 `json:"allSyncedMs"`
	// CPUSeconds is the control plane's CPU over the whole step (loading
	// the mesh, connects, churn), ConnectCPUSeconds from the first proxy's
	// stream to the last one's first full config.
	CPUSeconds        float64 `json:"cpuSeconds"`
	ConnectCPUSeconds float64 `json:"connectCpuSeconds"`
	PeakRSSMB         float64 `json:"peakRssMB"`
	// Per proxy and per service: what a reader compares across sizes.
	ConnectCPUPerProxyMs float64 `json:"connectCpuPerProxyMs"`
	RSSPerProxyKB        float64 `json:"rssPerProxyKB"`
	RSSPerServiceKB      float64 `json:"rssPerServiceKB"`
	// ChangeP99Ms is the churn's end-to-end P99, when the run churns.
	ChangeP99Ms float64 `json:"changeP99Ms,omitempty"`
	Report      *Report `json:"report"`
}

// Growth is how a figure grows with the proxy count: the exponent b of
// y = a * proxies^b fitted by least squares on logarithms. 1 is linear.
type Growth struct {
	Sync, ConnectCPU, PeakRSS float64
}

// ScaleReport is a scale run: each step, the fitted growth, and whether the
// per-proxy connect cost stayed within the bound asked for.
type ScaleReport struct {
	Steps  []ScaleStep `json:"steps"`
	Growth Growth      `json:"growth"`
	// CostRatio is the last step's connect CPU per proxy over the first's.
	CostRatio float64 `json:"connectCostRatio"`
}

// RunScale runs each config in turn (the same shape at growing sizes, as
// the caller built them) and fits the growth. A step that fails ends the
// run with its error and the steps done so far.
func RunScale(ctx context.Context, configs []Config, multiples []int) (*ScaleReport, error) {
	if len(configs) == 0 || len(configs) != len(multiples) {
		return nil, fmt.Errorf("scale: %d configs for %d sizes", len(configs), len(multiples))
	}
	sr := &ScaleReport{}
	for i, c := range configs {
		if c.Progress != nil {
			fmt.Fprintf(c.Progress, "cpload: scale step %d of %d: %dx, %d simulated proxies\n", i+1, len(configs), multiples[i], len(c.Mesh.Proxies))
		}
		r, err := Run(ctx, c)
		if err != nil {
			return sr, fmt.Errorf("scale step %dx (%d proxies): %w", multiples[i], len(c.Mesh.Proxies), err)
		}
		sr.Steps = append(sr.Steps, stepOf(multiples[i], r))
	}
	sr.fit()
	return sr, nil
}

func stepOf(multiple int, r *Report) ScaleStep {
	s := ScaleStep{Multiple: multiple, Proxies: r.Proxies, Services: r.Services, SyncedMs: r.Connect.AllSynced, Report: r}
	if p := r.Process; p != nil {
		s.CPUSeconds, s.ConnectCPUSeconds = p.CPUSeconds, p.ConnectCPU
		s.PeakRSSMB = max(p.PeakRSSMB, p.RSSMaxMB)
	}
	if r.Proxies > 0 {
		s.ConnectCPUPerProxyMs = 1000 * s.ConnectCPUSeconds / float64(r.Proxies)
		s.RSSPerProxyKB = 1024 * s.PeakRSSMB / float64(r.Proxies)
	}
	if r.Services > 0 {
		s.RSSPerServiceKB = 1024 * s.PeakRSSMB / float64(r.Services)
	}
	if r.Churn != nil {
		s.ChangeP99Ms = r.Churn.EndToEnd.P99
	}
	return s
}

func (sr *ScaleReport) fit() {
	var proxies, sync, cpu, rss []float64
	for _, s := range sr.Steps {
		proxies = append(proxies, float64(s.Proxies))
		sync = append(sync, s.SyncedMs)
		cpu = append(cpu, s.ConnectCPUSeconds)
		rss = append(rss, s.PeakRSSMB)
	}
	sr.Growth = Growth{Sync: GrowthExponent(proxies, sync), ConnectCPU: GrowthExponent(proxies, cpu), PeakRSS: GrowthExponent(proxies, rss)}
	if first, last := sr.Steps[0], sr.Steps[len(sr.Steps)-1]; first.ConnectCPUPerProxyMs > 0 {
		sr.CostRatio = last.ConnectCPUPerProxyMs / first.ConnectCPUPerProxyMs
	}
}

// GrowthExponent fits y = a * x^b by least squares on (ln x, ln y) and
// returns b; NaN when fewer than two points have positive x and y or the
// x are all equal.
func GrowthExponent(x, y []float64) float64 {
	var lx, ly []float64
	for i := range min(len(x), len(y)) {
		if x[i] > 0 && y[i] > 0 {
			lx, ly = append(lx, math.Log(x[i])), append(ly, math.Log(y[i]))
		}
	}
	n := float64(len(lx))
	if n < 2 {
		return math.NaN()
	}
	var sx, sy, sxx, sxy float64
	for i := range lx {
		sx, sy = sx+lx[i], sy+ly[i]
		sxx, sxy = sxx+lx[i]*lx[i], sxy+lx[i]*ly[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / den
}

// CheckCost says, in one line, if the connect CPU per proxy of the last
// step exceeds maxRatio times the first step's (nil if within, or if
// maxRatio is 0).
func (sr *ScaleReport) CheckCost(maxRatio float64) error {
	if maxRatio <= 0 || len(sr.Steps) < 2 {
		return nil
	}
	first, last := sr.Steps[0], sr.Steps[len(sr.Steps)-1]
	if first.ConnectCPUPerProxyMs <= 0 || last.ConnectCPUPerProxyMs <= 0 {
		return fmt.Errorf("the connect CPU per proxy could not be measured (%.2f ms at %d proxies, %.2f ms at %d): the control plane's process or its process_cpu_seconds_total is needed for --max-cost-ratio",
			first.ConnectCPUPerProxyMs, first.Proxies, last.ConnectCPUPerProxyMs, last.Proxies)
	}
	if sr.CostRatio > maxRatio {
		return fmt.Errorf("connect CPU per proxy grew %.2fx from %d to %d proxies (%.2f to %.2f ms), more than the %gx allowed",
			sr.CostRatio, first.Proxies, last.Proxies, first.ConnectCPUPerProxyMs, last.ConnectCPUPerProxyMs, maxRatio)
	}
	return nil
}

// Print writes the steps as a table, then the fitted growth.
func (sr *ScaleReport) Print(w io.Writer) {
	if len(sr.Steps) == 0 {
		return
	}
	first := sr.Steps[0].Report
	fmt.Fprintf(w, "cpload scale: %s mesh, sidecar scoping %s, %s, control plane %s\n",
		first.Shape, first.Scoping, protocol(first.Delta), controlPlaneName(first))
	fmt.Fprintf(w, "%6s %8s %8s %10s %9s %11s %12s %9s %11s %13s %10s\n",
		"size", "proxies", "services", "synced", "CPU s", "connect s", "ms/proxy", "peak MB", "KB/proxy", "KB/service", "change P99")
	for _, s := range sr.Steps {
		p99 := "-"
		if s.Report.Churn != nil {
			p99 = fmt.Sprintf("%.0f ms", s.ChangeP99Ms)
		}
		fmt.Fprintf(w, "%5dx %8d %8d %9.1fs %9.1f %11.1f %12.2f %9.0f %11.1f %13.1f %10s\n",
			s.Multiple, s.Proxies, s.Services, s.SyncedMs/1000, s.CPUSeconds, s.ConnectCPUSeconds,
			s.ConnectCPUPerProxyMs, s.PeakRSSMB, s.RSSPerProxyKB, s.RSSPerServiceKB, p99)
	}
	if len(sr.Steps) > 1 {
		fmt.Fprintf(w, "growth with proxies (1 is linear): sync %s, connect CPU %s, peak RSS %s; connect CPU per proxy %.2fx from the first size to the last\n",
			exponent(sr.Growth.Sync), exponent(sr.Growth.ConnectCPU), exponent(sr.Growth.PeakRSS), sr.CostRatio)
	}
}

func exponent(b float64) string {
	if math.IsNaN(b) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", b)
}

// controlPlaneName is what the run measured, as its provenance says.
func controlPlaneName(r *Report) string {
	cp := r.Provenance.ControlPlane
	if name := strings.TrimSpace(cp.Name + " " + cp.Version); name != "" {
		return name
	}
	return r.Target
}
