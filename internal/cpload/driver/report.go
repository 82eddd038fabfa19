package driver

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/results"
)

// Percentiles in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50Ms"`
	P90 float64 `json:"p90Ms"`
	P99 float64 `json:"p99Ms"`
	Max float64 `json:"maxMs"`
}

// Report is one load test's figures. Times are milliseconds, sizes bytes.
type Report struct {
	Name      string    `json:"name"`
	Shape     string    `json:"shape"`
	Started   time.Time `json:"started"`
	Target    string    `json:"target"`
	External  bool      `json:"external"` // not meshperf pilot started here
	Delta     bool      `json:"delta"`
	Proxies   int       `json:"proxies"`
	Services  int       `json:"services"`
	Resources int       `json:"resources"`
	Scoping   Scoping   `json:"sidecar"`
	Exclude   []string  `json:"discoverySelectorsExclude,omitempty"`
	Knobs     Knobs     `json:"knobs"`

	Connect      ConnectFigures       `json:"connect"`
	ConfigSize   ConfigSizeFigures    `json:"configSize"`
	Churn        *ChurnFigures        `json:"churn,omitempty"`
	ControlPlane *ControlPlaneFigures `json:"controlPlane,omitempty"`
	Prometheus   *PromFigures         `json:"prometheus,omitempty"`
	Process      *ProcessFigures      `json:"process,omitempty"`
	Simulator    *SimulatorFigures    `json:"simulator,omitempty"`
	Kube         *KubeFigures         `json:"kube,omitempty"`
	// Shard is one shard's run of a fleet split over several processes
	// (-shard), with what merging needs; Shards are the shards a merged
	// report was made of.
	Shard  *ShardFigures  `json:"shard,omitempty"`
	Shards []ShardSummary `json:"shards,omitempty"`
	Notes  []string       `json:"notes,omitempty"`
	// Provenance says what was measured and where: meshperf's build, the
	// control plane (no data plane: the proxies are simulated), the
	// parameters hash, the labels, the machine.
	Provenance results.Provenance `json:"provenance"`

	// What the figures were made from, for a caller that splits them
	// further (bench pilot): each change with its receivers, and the
	// control plane's metrics before and after the churn.
	changes       []churn.ChangeResult
	before, after *metrics.Snapshot
}

// Changes are the churn's changes, each with when it was applied and who
// received it when.
func (r *Report) Changes() []churn.ChangeResult { return r.changes }

// Metrics are the control plane's /metrics scraped before and after the
// churn (nil when it has none).
func (r *Report) Metrics() (before, after *metrics.Snapshot) { return r.before, r.after }

// ConnectFigures are the first sync after connecting.
type ConnectFigures struct {
	AllConnected float64     `json:"allConnectedMs"` // Start to the last stream open
	AllSynced    float64     `json:"allSyncedMs"`    // Start to the last proxy's first full config
	FirstConfig  Percentiles `json:"firstConfig"`    // per proxy, stream open to full config
}

// ConfigSizeFigures are what a sidecar's first full config weighed (xDS
// bytes on the wire), and one workload's config dump (Envoy admin JSON, the
// book's measure) when the control plane serves it.
type ConfigSizeFigures struct {
	SidecarMean       float64            `json:"sidecarMeanBytes"`
	SidecarMax        int64              `json:"sidecarMaxBytes"`
	ByTypeMean        map[string]float64 `json:"byTypeMeanBytes"`
	Workload          string             `json:"workload,omitempty"`
	WorkloadBytes     int64              `json:"workloadBytes,omitempty"`
	WorkloadDumpBytes int64              `json:"workloadConfigDumpBytes,omitempty"`
	workloadID        string
}

// ChurnFigures are the changes' end-to-end times, from applied to received.
type ChurnFigures struct {
	Kind       string      `json:"kind"`
	Changes    int         `json:"changes"`
	DurationMs float64     `json:"durationMs"`
	EndToEnd   Percentiles `json:"endToEnd"`  // every (change, proxy) delivery
	PerChange  Percentiles `json:"perChange"` // each change until its last proxy
	Expected   int         `json:"expected"`
	Missed     int         `json:"missed"`
	ApplyMaxMs float64     `json:"applyMaxMs"` // the API's longest accept
	LagMaxMs   float64     `json:"lagMaxMs"`   // paced churn's worst lateness
}

// ControlPlaneFigures come from scraping its /metrics before and after the
// churn.
type ControlPlaneFigures struct {
	Pushes       float64            `json:"pushes"` // change of sum(pilot_xds_pushes)
	PushesByType map[string]float64 `json:"pushesByType"`
	Convergence  Percentiles        `json:"convergence"` // pilot_proxy_convergence_time over the churn
	Rejects      float64            `json:"rejects"`
}

// PromFigures are the book's PromQL answers.
type PromFigures struct {
	PushCount float64  `json:"pushCount"`
	P50       float64  `json:"p50Ms"`
	P90       float64  `json:"p90Ms"`
	P99       float64  `json:"p99Ms"`
	Queries   []string `json:"queries"`
}

// ProcessFigures are the control plane's CPU and memory.
type ProcessFigures struct {
	Source        string  `json:"source"` // procstat or metrics
	CPUSeconds    float64 `json:"cpuSeconds"`
	ChurnCPU      float64 `json:"churnCpuSeconds"`
	ConnectCPU    float64 `json:"connectCpuSeconds"` // first stream to the last proxy's first full config
	RSSMaxMB      float64 `json:"rssMaxMB"`
	PeakRSSMB     float64 `json:"peakRssMB"` // VmHWM
	RSSAtEndMB    float64 `json:"rssAtEndMB"`
	SamplesInTest int     `json:"samples"`
	// RSSAtSyncMB is the RSS once every proxy had its first config and the
	// pushes their connecting caused were over, before any churn: what the
	// mesh and the connected proxies hold, shared out per proxy and per
	// service (KB) to see whether the cost grows linearly.
	RSSAtSyncMB        float64 `json:"rssAtSyncMB,omitempty"`
	KBPerProxyAtSync   float64 `json:"kbPerProxyAtSync,omitempty"`
	KBPerServiceAtSync float64 `json:"kbPerServiceAtSync,omitempty"`
}

// SimulatorFigures are cpload's own CPU and memory over the run, so that
// the simulator's cost is not mistaken for the control plane's.
type SimulatorFigures struct {
	CPUSeconds float64 `json:"cpuSeconds"`
	RSSMaxMB   float64 `json:"rssMaxMB"`
	KBPerProxy float64 `json:"kbPerProxy"` // RSS max over the simulated proxies
}

// simulatorName is cpload's own process in the sampler.
const simulatorName = "cpload"

func newReport(c *Config, e *env, proxies int) *Report {
	r := &Report{Name: c.Name, Shape: c.Shape, Started: time.Now().UTC(), Target: e.xds, External: c.Target != "",
		Delta: c.Delta, Proxies: proxies, Resources: len(c.Mesh.All()), Services: c.Mesh.Count(config.KindService) + c.Mesh.Count(config.KindServiceEntry),
		Scoping: c.Scoping, Exclude: c.Exclude, Knobs: c.Knobs}
	// istiod started by the run (-istiod) gets the knobs as meshperf pilot does.
	startedIstiod := c.Kube != nil && c.Kube.Istiod != ""
	if r.External && !startedIstiod {
		r.Notes = append(r.Notes, "external control plane: knobs were not set by meshperf")
		if e.metricsURL == "" {
			r.Notes = append(r.Notes, "no --metrics-url: push counts, convergence, CPU and memory are unavailable; only the proxies' figures are shown")
		}
	}
	return r
}

func (r *Report) setChurn(res churn.Result) {
	f := &ChurnFigures{Kind: res.Kind, Changes: len(res.Changes), DurationMs: ms(res.End.Sub(res.Start)),
		EndToEnd: pct(res.EndToEnd), PerChange: pct(res.PerChange), Expected: res.Expected, Missed: res.Missed}
	for _, c := range res.Changes {
		f.ApplyMaxMs = math.Max(f.ApplyMaxMs, ms(c.ApplyTook))
		f.LagMaxMs = math.Max(f.LagMaxMs, ms(c.Lag))
	}
	r.changes = res.Changes
	if res.Expected == 0 {
		r.Notes = append(r.Notes, "no proxy imports the changed namespace: nothing to time end to end")
	}
	r.Churn = f
}

func (r *Report) setControlPlane(before, after scrape) {
	r.before, r.after = before.snap, after.snap
	if before.snap == nil || after.snap == nil {
		return
	}
	cp := &ControlPlaneFigures{PushesByType: map[string]float64{},
		Pushes:  after.snap.Sum("pilot_xds_pushes") - before.snap.Sum("pilot_xds_pushes"),
		Rejects: after.snap.Sum("pilot_total_xds_rejects") - before.snap.Sum("pilot_total_xds_rejects")}
	b := before.snap.By("pilot_xds_pushes", "type")
	for t, v := range after.snap.By("pilot_xds_pushes", "type") {
		if d := v - b[t]; d != 0 {
			cp.PushesByType[t] = d
		}
	}
	h := after.snap.Histogram("pilot_proxy_convergence_time").Sub(before.snap.Histogram("pilot_proxy_convergence_time"))
	cp.Convergence = Percentiles{N: int(h.Count), P50: finite(h.Quantile(0.5)) * 1000, P90: finite(h.Quantile(0.9)) * 1000, P99: finite(h.Quantile(0.99)) * 1000}
	r.ControlPlane = cp
}

func (r *Report) setResources(e *env, before, after scrape) {
	const mb = 1 << 20
	if e.sampler != nil {
		all := e.sampler.Window(time.Time{}, after.at)
		test := e.sampler.Window(before.at, after.at)
		atSync := e.sampler.Window(before.at, before.at)
		for i, u := range all {
			if u.Samples == 0 {
				continue
			}
			switch {
			case u.Name == simulatorName && u.PID == os.Getpid():
				r.Simulator = &SimulatorFigures{CPUSeconds: u.CPU.Seconds(), RSSMaxMB: float64(u.MaxRSS) / mb,
					KBPerProxy: perKB(float64(u.MaxRSS), r.Proxies)}
			case i == 0 && e.controlPlaneSampled:
				r.Process = &ProcessFigures{Source: "procstat", CPUSeconds: u.CPU.Seconds(), RSSMaxMB: float64(u.MaxRSS) / mb,
					PeakRSSMB: float64(u.MaxHWM) / mb, SamplesInTest: test[i].Samples, ChurnCPU: test[i].CPU.Seconds()}
				if atSync[i].Samples > 0 {
					r.Process.setAtSync(float64(atSync[i].MaxRSS), r.controlPlaneProxies(), r.Services)
				}
			}
		}
	}
	if after.snap != nil && after.snap.Has("process_cpu_seconds_total") {
		if r.Process == nil {
			r.Process = &ProcessFigures{Source: "metrics", CPUSeconds: after.snap.Sum("process_cpu_seconds_total"),
				ChurnCPU: after.snap.Sum("process_cpu_seconds_total") - before.snap.Sum("process_cpu_seconds_total")}
			if before.snap.Has("process_resident_memory_bytes") {
				r.Process.setAtSync(before.snap.Sum("process_resident_memory_bytes"), r.controlPlaneProxies(), r.Services)
			}
		}
		r.Process.RSSAtEndMB = after.snap.Sum("process_resident_memory_bytes") / mb
	}
}

// controlPlaneProxies is how many proxies the control plane holds: the
// whole fleet, also in a shard's report (shard 1 measures it once every
// shard's proxies are connected).
func (r *Report) controlPlaneProxies() int {
	if r.Shard != nil {
		return r.Shard.Run.FleetProxies
	}
	return r.Proxies
}

// setAtSync records the control plane's RSS at sync, in bytes, and its
// share per proxy and per service.
func (p *ProcessFigures) setAtSync(rss float64, proxies, services int) {
	p.RSSAtSyncMB = rss / (1 << 20)
	p.KBPerProxyAtSync = perKB(rss, proxies)
	p.KBPerServiceAtSync = perKB(rss, services)
}

// perKB is bytes shared out over n, in KB; 0 when there is nothing to
// share over.
func perKB(bytes float64, n int) float64 {
	if n <= 0 {
		return 0
	}
	return bytes / float64(n) / 1024
}

// setPrometheus asks the book's queries at the end of the test; the push
// count is the difference of sum(pilot_xds_pushes) at the two instants.
func (r *Report) setPrometheus(ctx context.Context, pc *metrics.PromClient, start, end time.Time) error {
	if err := pc.WaitScrapedAfter(ctx, metrics.ScrapeJob, end); err != nil {
		return err
	}
	p := &PromFigures{Queries: []string{metrics.PushCountQuery, metrics.ConvergenceP50, metrics.ConvergenceP90, metrics.ConvergenceP99}}
	a, err := pc.Query(ctx, metrics.PushCountQuery, start)
	if err != nil {
		return err
	}
	b, err := pc.Query(ctx, metrics.PushCountQuery, end)
	if err != nil {
		return err
	}
	p.PushCount = b - a
	for i, q := range []string{metrics.ConvergenceP50, metrics.ConvergenceP90, metrics.ConvergenceP99} {
		v, err := pc.Query(ctx, q, end)
		if err != nil {
			return err
		}
		*[]*float64{&p.P50, &p.P90, &p.P99}[i] = finite(v) * 1000
	}
	r.Prometheus = p
	return nil
}

// configSize sums the sidecars' first full config.
func configSize(f *sim.Fleet, specs []sim.ProxySpec) ConfigSizeFigures {
	out := ConfigSizeFigures{ByTypeMean: map[string]float64{}}
	n := 0
	workload := -1
	for i, p := range specs {
		if p.Router {
			continue
		}
		if workload < 0 || (p.WorkloadName == "catalog" && specs[workload].WorkloadName != "catalog") {
			workload = i
		}
		s := f.Stats(i)
		var total int64
		for _, t := range sim.Types {
			total += s.SyncBytes[t]
			out.ByTypeMean[t.String()] += float64(s.SyncBytes[t])
		}
		out.SidecarMean += float64(total)
		out.SidecarMax = max(out.SidecarMax, total)
		n++
	}
	if n > 0 {
		out.SidecarMean /= float64(n)
		for k := range out.ByTypeMean {
			out.ByTypeMean[k] /= float64(n)
		}
	}
	if workload >= 0 {
		s := f.Stats(workload)
		out.Workload = specs[workload].Name + "." + specs[workload].Namespace
		out.workloadID = s.NodeID
		for _, t := range sim.Types {
			out.WorkloadBytes += s.SyncBytes[t]
		}
	}
	return out
}

// Print writes the report for people.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%s: %s mesh, %d services, %d resources, %d simulated proxies (%s), sidecar scoping %s\n",
		orDefault(r.Name, "cpload run"), r.Shape, r.Services, r.Resources, r.Proxies, protocol(r.Delta), r.Scoping)
	if len(r.Exclude) > 0 {
		fmt.Fprintf(w, "  discoverySelectors exclude: %s\n", strings.Join(r.Exclude, ", "))
	}
	if cp := r.Provenance.ControlPlane; r.External && cp.Name != "" && cp.Name != unknownControlPlane {
		fmt.Fprintf(w, "  control plane %s %s at %s%s\n", cp.Name, cp.Version, r.Target, knobs(r.Knobs))
	} else {
		fmt.Fprintf(w, "  control plane %s%s\n", r.Target, knobs(r.Knobs))
	}
	if k := r.Kube; k != nil {
		fmt.Fprintf(w, "kubernetes: %d pods on %d kwok nodes; objects created in %s, every pod Running with its IP after %s\n",
			k.Pods, k.Nodes, msStr(k.CreateMs), msStr(k.ReadyMs))
	}
	fmt.Fprintf(w, "connect: all connected %s, all synced %s; first config per proxy p50 %s p99 %s\n",
		msStr(r.Connect.AllConnected), msStr(r.Connect.AllSynced), msStr(r.Connect.FirstConfig.P50), msStr(r.Connect.FirstConfig.P99))
	cs := r.ConfigSize
	fmt.Fprintf(w, "config size per sidecar (xDS bytes): mean %s, max %s [%s]\n", bytesStr(cs.SidecarMean), bytesStr(float64(cs.SidecarMax)), byType(cs.ByTypeMean, bytesStr))
	if cs.Workload != "" {
		fmt.Fprintf(w, "  %s: %s xDS", cs.Workload, bytesStr(float64(cs.WorkloadBytes)))
		if cs.WorkloadDumpBytes > 0 {
			fmt.Fprintf(w, ", config_dump %s", bytesStr(float64(cs.WorkloadDumpBytes)))
		}
		fmt.Fprintln(w)
	}
	if c := r.Churn; c != nil {
		fmt.Fprintf(w, "churn %s: %d changes in %s; end to end (applied -> received) p50 %s p90 %s p99 %s max %s over %d deliveries, %d missed\n",
			c.Kind, c.Changes, msStr(c.DurationMs), msStr(c.EndToEnd.P50), msStr(c.EndToEnd.P90), msStr(c.EndToEnd.P99), msStr(c.EndToEnd.Max), c.EndToEnd.N, c.Missed)
		fmt.Fprintf(w, "  per change (until its last proxy) p50 %s p99 %s; slowest API apply %s, worst lag %s\n",
			msStr(c.PerChange.P50), msStr(c.PerChange.P99), msStr(c.ApplyMaxMs), msStr(c.LagMaxMs))
	}
	if cp := r.ControlPlane; cp != nil {
		fmt.Fprintf(w, "pushes: %.0f [%s], rejects %.0f; pilot_proxy_convergence_time p50 %s p90 %s p99 %s (%d observations)\n",
			cp.Pushes, byType(cp.PushesByType, func(v float64) string { return fmt.Sprintf("%.0f", v) }), cp.Rejects, msStr(cp.Convergence.P50), msStr(cp.Convergence.P90), msStr(cp.Convergence.P99), cp.Convergence.N)
	}
	if p := r.Prometheus; p != nil {
		fmt.Fprintf(w, "Prometheus (the book's PromQL): Push count: %.0f, Latency in the last minute: p50 %s p90 %s p99 %s\n",
			p.PushCount, msStr(p.P50), msStr(p.P90), msStr(p.P99))
	}
	if p := r.Process; p != nil && p.Source == "metrics" {
		// Scraped: only the RSS at the end is known, not its maximum.
		fmt.Fprintf(w, "control plane process (%s): CPU %.2f s (%.2f s connecting, %.2f s during churn), RSS at the end %.0f MB\n",
			p.Source, p.CPUSeconds, p.ConnectCPU, p.ChurnCPU, p.RSSAtEndMB)
	} else if p != nil {
		fmt.Fprintf(w, "control plane process (%s): CPU %.2f s (%.2f s connecting, %.2f s during churn), RSS max %.0f MB, peak RSS %.0f MB\n",
			p.Source, p.CPUSeconds, p.ConnectCPU, p.ChurnCPU, p.RSSMaxMB, p.PeakRSSMB)
	}
	if p := r.Process; p != nil && p.RSSAtSyncMB > 0 {
		fmt.Fprintf(w, "control plane memory at sync: RSS %.0f MB, %.1f KB per proxy, %.1f KB per service\n",
			p.RSSAtSyncMB, p.KBPerProxyAtSync, p.KBPerServiceAtSync)
	}
	if s := r.Simulator; s != nil {
		who := "cpload"
		if len(r.Shards) > 0 {
			who = fmt.Sprintf("%d cpload processes, summed", len(r.Shards))
		}
		fmt.Fprintf(w, "simulator (%s): CPU %.2f s, RSS max %.0f MB, %.1f KB per simulated proxy\n",
			who, s.CPUSeconds, s.RSSMaxMB, s.KBPerProxy)
	}
	for _, s := range r.Shards {
		fmt.Fprintf(w, "  shard %s: %d proxies", s.Shard, s.Proxies)
		if sim := s.Simulator; sim != nil {
			fmt.Fprintf(w, ", simulator CPU %.2f s, RSS max %.0f MB", sim.CPUSeconds, sim.RSSMaxMB)
		}
		fmt.Fprintln(w)
	}
	if s := r.Shard; s != nil {
		received, expected := 0, 0
		for _, c := range s.Changes {
			received += len(c.Arrivals)
			expected += c.Expected
		}
		fmt.Fprintf(w, "shard %s of a fleet of %d proxies: %d of the %d changes' %d deliveries to this shard's proxies seen\n",
			s.Shard, s.Run.FleetProxies, received, len(s.Changes), expected)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func protocol(delta bool) string {
	if delta {
		return "delta xDS"
	}
	return "state of the world"
}

func knobs(k Knobs) string {
	if parts := k.env(); len(parts) > 0 {
		return " with " + strings.Join(parts, " ")
	}
	return ""
}

func msStr(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	// The thresholds are where the shorter form's rounding would carry:
	// 99.95 ms printed with one decimal is "100.0ms".
	case v >= 9999.5:
		return fmt.Sprintf("%.1fs", v/1000)
	case v >= 99.95:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fms", v)
}

func bytesStr(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%.0f KB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func byType(m map[string]float64, format func(float64) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if m[k] != 0 {
			parts = append(parts, k+" "+format(m[k]))
		}
	}
	return strings.Join(parts, ", ")
}
