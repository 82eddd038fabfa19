package kubelab

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/lab"
	"github.com/meshperf/meshperf/internal/results"
)

// The kubelet's resource metrics (cAdvisor's names), which Istio's
// benchmark queries for container="istio-proxy".
const (
	cpuMetric    = "container_cpu_usage_seconds_total"
	memoryMetric = "container_memory_working_set_bytes"
)

// sampleInterval is how often the sampler reads the kubelets' resource
// metrics over the steady window; the kubelet refreshes them on its own
// housekeeping interval, so samples carry its timestamps and repeats are
// dropped.
const sampleInterval = time.Second

// sample is one reading of a counter or gauge at the kubelet's timestamp.
type sample struct {
	value float64
	at    time.Time
}

// resourceSampler gathers each container's CPU and memory over a run's
// steady window: from the kubelet of each pod's node (the API server's
// node proxy, nodes/NODE/proxy/metrics/resource), or with --prom-url from
// Prometheus with the queries Istio's benchmark uses.
type resourceSampler struct {
	k     *kubeLab
	roles []containerRole

	mu               sync.Mutex
	cpu, mem         map[string][]sample // by role
	winStart, winEnd time.Time
	err              error // the last read that failed
}

func (k *kubeLab) newSampler() *resourceSampler {
	return &resourceSampler{k: k, roles: k.roles(), cpu: map[string][]sample{}, mem: map[string][]sample{}}
}

// run samples from warmup after its start until duration (or ctx) ends.
func (s *resourceSampler) run(ctx context.Context, warmup, duration time.Duration) {
	start := time.Now()
	select {
	case <-ctx.Done():
		return
	case <-time.After(warmup):
	}
	s.mu.Lock()
	s.winStart = time.Now()
	s.mu.Unlock()
	end := start.Add(duration)
	for {
		if s.k.cfg.PromURL == "" {
			s.read(ctx)
		}
		now := time.Now()
		s.mu.Lock()
		s.winEnd = now
		s.mu.Unlock()
		if !now.Add(sampleInterval).Before(end) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(sampleInterval):
		}
	}
}

// read takes one sample of every container from its node's kubelet.
func (s *resourceSampler) read(ctx context.Context) {
	byNode := map[string]string{}
	for _, r := range s.roles {
		node := r.pod.Spec.NodeName
		if _, ok := byNode[node]; ok {
			continue
		}
		b, err := s.k.c.Kube.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node, "proxy/metrics/resource").DoRaw(ctx)
		if err != nil {
			s.mu.Lock()
			s.err = fmt.Errorf("node %s resource metrics: %w", node, err)
			s.mu.Unlock()
			continue
		}
		byNode[node] = string(b)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.roles {
		text, ok := byNode[r.pod.Spec.NodeName]
		if !ok {
			continue
		}
		for metric, dst := range map[string]map[string][]sample{cpuMetric: s.cpu, memoryMetric: s.mem} {
			if v, ok := containerSample(text, metric, r.pod.Namespace, r.pod.Name, r.container); ok {
				if n := len(dst[r.role]); n == 0 || !dst[r.role][n-1].at.Equal(v.at) {
					dst[r.role] = append(dst[r.role], v)
				}
			}
		}
	}
}

// containerSample is metric's sample for one container in the kubelet's
// text, at the kubelet's timestamp.
func containerSample(text, metric, ns, pod, container string) (sample, bool) {
	v, ms, ok := lab.MetricSample(text, metric, map[string]string{"container": container, "namespace": ns, "pod": pod})
	if !ok {
		return sample{}, false
	}
	at := time.Now()
	if ms > 0 {
		at = time.UnixMilli(ms)
	}
	return sample{v, at}, true
}

// processes are the run's figures per container: CPU as the counter's
// rate between its first and last sample in the window (NaN with fewer
// than two, e.g. a window shorter than the kubelet's refresh), memory as
// the working set's mean and maximum.
func (s *resourceSampler) processes(ctx context.Context) []results.Process {
	const mib = 1 << 20
	if s.k.cfg.PromURL != "" {
		return s.promProcesses(ctx)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		s.k.logf("meshperf lab: %v", s.err)
	}
	var out []results.Process
	for _, r := range s.roles {
		p := results.Process{Role: r.role, Pod: r.pod.Name, VCPU: math.NaN(), RSSMB: math.NaN(), PSSMB: math.NaN(), MaxRSSMB: math.NaN()}
		if c := s.cpu[r.role]; len(c) >= 2 {
			if dt := c[len(c)-1].at.Sub(c[0].at).Seconds(); dt > 0 {
				p.VCPU = (c[len(c)-1].value - c[0].value) / dt
			}
		}
		if m := s.mem[r.role]; len(m) > 0 {
			sum, peak := 0.0, 0.0
			for _, v := range m {
				sum += v.value
				peak = max(peak, v.value)
			}
			p.RSSMB, p.MaxRSSMB = sum/float64(len(m))/mib, peak/mib
		}
		out = append(out, p)
	}
	return out
}

// promProcesses asks Prometheus as Istio's benchmark does: the CPU
// counter's rate and the working set's average over the steady window, per
// container.
func (s *resourceSampler) promProcesses(ctx context.Context) []results.Process {
	const mib = 1 << 20
	s.mu.Lock()
	from, to := s.winStart, s.winEnd
	s.mu.Unlock()
	client := &metrics.PromClient{URL: strings.TrimSuffix(s.k.cfg.PromURL, "/")}
	window := fmt.Sprintf("%ds", max(int(to.Sub(from).Round(time.Second).Seconds()), 1))
	var out []results.Process
	for _, r := range s.roles {
		p := results.Process{Role: r.role, Pod: r.pod.Name, VCPU: math.NaN(), RSSMB: math.NaN(), PSSMB: math.NaN(), MaxRSSMB: math.NaN()}
		sel := fmt.Sprintf(`{namespace=%q,pod=%q,container=%q}`, r.pod.Namespace, r.pod.Name, r.container)
		if from.IsZero() {
			out = append(out, p)
			continue
		}
		if v, err := client.Query(ctx, "sum(rate("+cpuMetric+sel+"["+window+"]))", to); err == nil {
			p.VCPU = v
		} else {
			s.k.logf("meshperf lab: --prom-url: %s: %v", r, err)
		}
		if v, err := client.Query(ctx, "sum(avg_over_time("+memoryMetric+sel+"["+window+"]))", to); err == nil {
			p.RSSMB = v / mib
		}
		if v, err := client.Query(ctx, "sum(max_over_time("+memoryMetric+sel+"["+window+"]))", to); err == nil {
			p.MaxRSSMB = v / mib
		}
		out = append(out, p)
	}
	return out
}
