package push

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// histogram returns a histogram's sample count and sum from reg.
func histogram(t *testing.T, reg prometheus.Gatherer, name string) (uint64, float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("%s not registered", name)
	return 0, 0
}

// TestMetricsMatchIstiod pins names, types, labels and buckets: Istio's
// dashboards and PromQL depend on every one of them.
func TestMetricsMatchIstiod(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	start := time.Unix(100, 0)
	m.observeDebounce(250 * time.Millisecond)
	m.ObservePushContextInit(20 * time.Millisecond)
	m.ObserveConvergence(&model.PushRequest{Start: start}, start.Add(2*time.Second))
	m.ObserveConvergence(&model.PushRequest{}, start) // no start: ignored
	m.observeDequeue(&model.PushRequest{Start: start, Reason: map[model.TriggerReason]int{model.ReasonConfig: 3}}, start.Add(4*time.Second))
	m.CountInbound(InboundService)

	want := `
# HELP pilot_debounce_time Delay in seconds between the first config enters debouncing and the merged push request is pushed into the push queue.
# TYPE pilot_debounce_time histogram
pilot_debounce_time_bucket{le="0.01"} 0
pilot_debounce_time_bucket{le="0.1"} 0
pilot_debounce_time_bucket{le="0.5"} 1
pilot_debounce_time_bucket{le="1"} 1
pilot_debounce_time_bucket{le="3"} 1
pilot_debounce_time_bucket{le="5"} 1
pilot_debounce_time_bucket{le="10"} 1
pilot_debounce_time_bucket{le="20"} 1
pilot_debounce_time_bucket{le="30"} 1
pilot_debounce_time_bucket{le="+Inf"} 1
pilot_debounce_time_sum 0.25
pilot_debounce_time_count 1
# HELP pilot_inbound_updates Total number of updates received by pilot.
# TYPE pilot_inbound_updates counter
pilot_inbound_updates{type="svc"} 1
# HELP pilot_proxy_convergence_time Delay in seconds between config change and a proxy receiving all required configuration.
# TYPE pilot_proxy_convergence_time histogram
pilot_proxy_convergence_time_bucket{le="0.1"} 0
pilot_proxy_convergence_time_bucket{le="0.5"} 0
pilot_proxy_convergence_time_bucket{le="1"} 0
pilot_proxy_convergence_time_bucket{le="3"} 1
pilot_proxy_convergence_time_bucket{le="5"} 1
pilot_proxy_convergence_time_bucket{le="10"} 1
pilot_proxy_convergence_time_bucket{le="20"} 1
pilot_proxy_convergence_time_bucket{le="30"} 1
pilot_proxy_convergence_time_bucket{le="+Inf"} 1
pilot_proxy_convergence_time_sum 2
pilot_proxy_convergence_time_count 1
# HELP pilot_proxy_queue_time Time in seconds, a proxy is in the push queue before being dequeued.
# TYPE pilot_proxy_queue_time histogram
pilot_proxy_queue_time_bucket{le="0.1"} 0
pilot_proxy_queue_time_bucket{le="0.5"} 0
pilot_proxy_queue_time_bucket{le="1"} 0
pilot_proxy_queue_time_bucket{le="3"} 0
pilot_proxy_queue_time_bucket{le="5"} 1
pilot_proxy_queue_time_bucket{le="10"} 1
pilot_proxy_queue_time_bucket{le="20"} 1
pilot_proxy_queue_time_bucket{le="30"} 1
pilot_proxy_queue_time_bucket{le="+Inf"} 1
pilot_proxy_queue_time_sum 4
pilot_proxy_queue_time_count 1
# HELP pilot_push_triggers Total number of times a push was triggered, labeled by reason for the push.
# TYPE pilot_push_triggers counter
pilot_push_triggers{type="config"} 3
# HELP pilot_pushcontext_init_seconds Total time in seconds Pilot takes to init pushContext.
# TYPE pilot_pushcontext_init_seconds histogram
pilot_pushcontext_init_seconds_bucket{le="0.01"} 0
pilot_pushcontext_init_seconds_bucket{le="0.1"} 1
pilot_pushcontext_init_seconds_bucket{le="0.5"} 1
pilot_pushcontext_init_seconds_bucket{le="1"} 1
pilot_pushcontext_init_seconds_bucket{le="3"} 1
pilot_pushcontext_init_seconds_bucket{le="5"} 1
pilot_pushcontext_init_seconds_bucket{le="+Inf"} 1
pilot_pushcontext_init_seconds_sum 0.02
pilot_pushcontext_init_seconds_count 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

func TestMetricsSharedOnOneRegistryAndNilSafe(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, b := NewMetrics(reg), NewMetrics(reg)
	a.CountInbound(InboundConfig)
	b.CountInbound(InboundConfig)
	if got := testutil.ToFloat64(a.inboundUpdates.WithLabelValues("config")); got != 2 {
		t.Errorf("two pipelines on one registry counted %v, want a shared 2", got)
	}
	var none *Metrics
	none.CountInbound(InboundEDS)
	none.ObservePushContextInit(time.Second)
	none.ObserveConvergence(&model.PushRequest{Start: time.Now()}, time.Now())
	none.observeDequeue(&model.PushRequest{}, time.Now())
	none.observeDebounce(time.Second)
}

func TestMetricsIgnoreNegativeReasonCounts(t *testing.T) {
	m := NewMetrics(nil)
	m.observeDequeue(&model.PushRequest{Reason: map[model.TriggerReason]int{model.ReasonProxy: -1}}, time.Now())
	if got := testutil.ToFloat64(m.pushTriggers.WithLabelValues("proxy")); got != 0 {
		t.Errorf("counted %v", got)
	}
}

func TestInboxCountsLikeIstiod(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	box := NewInbox(m)
	ctx := context.Background()
	now := time.Now()
	mustInbound := func(kind InboundType, req *model.PushRequest) {
		t.Helper()
		if err := box.Inbound(ctx, kind, req); err != nil {
			t.Fatal(err)
		}
	}
	mustInbound(InboundConfig, model.NewPushRequest(model.ReasonConfig, true, now))
	mustInbound(InboundEDS, model.NewPushRequest(model.ReasonEndpoint, false, now))
	mustInbound(InboundEDS, nil) // endpoints changed, nothing to push
	mustInbound(InboundService, nil)
	mustInbound(InboundServiceDelete, nil)
	want := map[string]float64{"config": 2, "eds": 2, "svc": 1, "svcdelete": 1}
	for typ, n := range want {
		if got := testutil.ToFloat64(m.inboundUpdates.WithLabelValues(typ)); got != n {
			t.Errorf("pilot_inbound_updates{type=%q} = %v, want %v", typ, got, n)
		}
	}
	if len(box.C()) != 2 {
		t.Errorf("%d requests reached the debouncer, want 2", len(box.C()))
	}
	// A full inbox blocks until ctx ends.
	for len(box.C()) < cap(box.ch) {
		mustInbound(InboundConfig, model.NewPushRequest(model.ReasonConfig, true, now))
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := box.Inbound(cancelled, InboundConfig, model.NewPushRequest(model.ReasonConfig, true, now)); err == nil {
		t.Error("Inbound into a full inbox with a cancelled context succeeded")
	}
}
