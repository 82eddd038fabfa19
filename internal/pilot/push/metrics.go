package push

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// InboundType is the type label of pilot_inbound_updates: what kind of change
// reached the control plane.
type InboundType string

// istiod's inbound update types.
const (
	InboundConfig        InboundType = "config"
	InboundEDS           InboundType = "eds"
	InboundService       InboundType = "svc"
	InboundServiceDelete InboundType = "svcdelete"
)

// Metrics are the push pipeline's Prometheus series, with istiod's names,
// types, labels and buckets so its dashboards and PromQL work unchanged. A nil
// *Metrics records nothing, which keeps tests and tools free of a registry.
type Metrics struct {
	inboundUpdates  *prometheus.CounterVec
	debounceTime    prometheus.Histogram
	pushContextInit prometheus.Histogram
	queueTime       prometheus.Histogram
	convergenceTime prometheus.Histogram
	pushTriggers    *prometheus.CounterVec

	// triggers caches pilot_push_triggers children: every dequeue adds to a few
	// of them, and the label lookup would otherwise hash on each one.
	mu       sync.RWMutex
	triggers map[model.TriggerReason]prometheus.Counter
}

// Bucket boundaries, in seconds, from istiod.
var (
	debounceBuckets    = []float64{.01, .1, .5, 1, 3, 5, 10, 20, 30}
	pushContextBuckets = []float64{.01, .1, .5, 1, 3, 5}
	proxyBuckets       = []float64{.1, .5, 1, 3, 5, 10, 20, 30}
)

// NewMetrics creates the pipeline's series and registers them with reg (nil:
// not registered). If reg already holds an identical series, for example
// from a second pipeline on the same registry, that one is shared.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		inboundUpdates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_inbound_updates",
			Help: "Total number of updates received by pilot.",
		}, []string{"type"}),
		debounceTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_debounce_time",
			Help:    "Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue.",
			Buckets: debounceBuckets,
		}),
		pushContextInit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_pushcontext_init_seconds",
			Help:    "Total time in seconds Pilot takes to init pushContext.",
			Buckets: pushContextBuckets,
		}),
		queueTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_proxy_queue_time",
			Help:    "Time in seconds, a proxy is in the push queue before being dequeued.",
			Buckets: proxyBuckets,
		}),
		convergenceTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_proxy_convergence_time",
			Help:    "Delay in seconds between config change and a proxy receiving all required configuration.",
			Buckets: proxyBuckets,
		}),
		pushTriggers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_push_triggers",
			Help: "Total number of times a push was triggered, labeled by reason for the push.",
		}, []string{"type"}),
		triggers: make(map[model.TriggerReason]prometheus.Counter),
	}
	if reg != nil {
		m.inboundUpdates = register(reg, m.inboundUpdates)
		m.debounceTime = register(reg, m.debounceTime)
		m.pushContextInit = register(reg, m.pushContextInit)
		m.queueTime = register(reg, m.queueTime)
		m.convergenceTime = register(reg, m.convergenceTime)
		m.pushTriggers = register(reg, m.pushTriggers)
	}
	return m
}

// register adds c to reg, or returns the identical collector already there.
// Any other conflict (same name, different shape) is a bug in whoever
// registered first; it is logged rather than panicking, and c keeps counting
// unexported so the pipeline itself is unaffected.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(T); ok {
			return existing
		}
	}
	slog.Error("push metrics: cannot register a series; it will not be exported", "err", err)
	return c
}

// CountInbound adds one to pilot_inbound_updates{type=kind}. Inbox.Inbound
// calls it; sources that feed the debouncer some other way call it directly.
func (m *Metrics) CountInbound(kind InboundType) {
	if m == nil {
		return
	}
	m.inboundUpdates.WithLabelValues(string(kind)).Inc()
}

// ObservePushContextInit records how long building a push snapshot took
// (pilot_pushcontext_init_seconds). The caller that builds the snapshot calls
// it, since this package does not know how.
func (m *Metrics) ObservePushContextInit(d time.Duration) {
	if m == nil {
		return
	}
	m.pushContextInit.Observe(d.Seconds())
}

// ObserveConvergence records pilot_proxy_convergence_time for one proxy: from
// the request's start to now, when every send of that push returned. istiod
// records it in the xDS push itself, after the per-proxy filter, so a proxy
// that was skipped records nothing; the xDS package calls this at that point.
// Requests without a start are ignored.
func (m *Metrics) ObserveConvergence(req *model.PushRequest, now time.Time) {
	if m == nil || req == nil || req.Start.IsZero() {
		return
	}
	m.convergenceTime.Observe(now.Sub(req.Start).Seconds())
}

func (m *Metrics) observeDebounce(d time.Duration) {
	if m == nil {
		return
	}
	m.debounceTime.Observe(d.Seconds())
}

// observeDequeue records what istiod records when a proxy leaves the queue:
// its wait, and each merged reason's count.
func (m *Metrics) observeDequeue(req *model.PushRequest, now time.Time) {
	if m == nil || req == nil {
		return
	}
	if !req.Start.IsZero() {
		m.queueTime.Observe(now.Sub(req.Start).Seconds())
	}
	for reason, n := range req.Reason {
		if n > 0 { // a Prometheus counter panics on a negative add
			m.trigger(reason).Add(float64(n))
		}
	}
}

func (m *Metrics) trigger(reason model.TriggerReason) prometheus.Counter {
	m.mu.RLock()
	c, ok := m.triggers[reason]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c = m.pushTriggers.WithLabelValues(string(reason))
	m.mu.Lock()
	m.triggers[reason] = c
	m.mu.Unlock()
	return c
}
