package service

import (
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	promtext "github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/topology"
)

// The metrics are isotope's: names, types, labels and buckets, so that
// isotope's dashboards and queries read a meshperf service unchanged.
func TestMetricsAreIsotopes(t *testing.T) {
	g := newGraph(t)
	g.peer("b")
	svc := topology.Service{Name: "a", ErrorRate: 0.5, ResponseSize: 2048, Script: topology.Script{callTo("b", 300)}}
	_, url := g.start(svc, Config{})
	for range 4 { // two answered, two failed on purpose
		get(t, url+"/x", nil)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	snap, err := promtext.Parse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	fam := func(name string, typ dto.MetricType) *dto.MetricFamily {
		t.Helper()
		f := snap.Families[name]
		if f == nil || f.GetType() != typ {
			t.Fatalf("no %s %s in /metrics", typ, name)
		}
		return f
	}
	labels := func(m *dto.Metric) map[string]string {
		out := map[string]string{}
		for _, l := range m.GetLabel() {
			out[l.GetName()] = l.GetValue()
		}
		return out
	}
	bounds := func(h *dto.Histogram) []float64 {
		var out []float64
		for _, b := range h.GetBucket() {
			out = append(out, b.GetUpperBound())
		}
		return out
	}

	if v := fam("service_incoming_requests_total", dto.MetricType_COUNTER).GetMetric()[0].GetCounter().GetValue(); v != 4 {
		t.Errorf("service_incoming_requests_total = %v, want 4", v)
	}
	out := fam("service_outgoing_requests_total", dto.MetricType_COUNTER).GetMetric()
	if len(out) != 1 || labels(out[0])["destination_service"] != "b:8080" || out[0].GetCounter().GetValue() != 2 {
		t.Errorf("service_outgoing_requests_total = %v, want 2 for destination_service b:8080", out)
	}
	size := fam("service_outgoing_request_size", dto.MetricType_HISTOGRAM).GetMetric()
	if len(size) != 1 || size[0].GetHistogram().GetSampleSum() != 600 || size[0].GetHistogram().GetSampleCount() != 2 {
		t.Errorf("service_outgoing_request_size = %v, want 2 requests of 300 bytes", size)
	}
	sizeBounds := []float64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, math.Inf(1)}
	if got := bounds(size[0].GetHistogram()); !slices.Equal(got, sizeBounds) {
		t.Errorf("size buckets %v, want %v", got, sizeBounds)
	}

	byCode := map[string]*dto.Histogram{}
	for _, m := range fam("service_request_duration_seconds", dto.MetricType_HISTOGRAM).GetMetric() {
		byCode[labels(m)["code"]] = m.GetHistogram()
	}
	if byCode["200"].GetSampleCount() != 2 || byCode["500"].GetSampleCount() != 2 {
		t.Errorf("durations by code: 200 has %d, 500 has %d; want 2 and 2", byCode["200"].GetSampleCount(), byCode["500"].GetSampleCount())
	}
	if b := bounds(byCode["200"]); len(b) != 33 || b[0] != 0.007 || b[31] != 0.5 || !math.IsInf(b[32], 1) {
		t.Errorf("duration buckets %v, want isotope's 32 from 0.007 to 0.5, then +Inf", b)
	}
	resp200 := map[string]*dto.Histogram{}
	for _, m := range fam("service_response_size", dto.MetricType_HISTOGRAM).GetMetric() {
		resp200[labels(m)["code"]] = m.GetHistogram()
	}
	if got := resp200["200"].GetSampleSum(); got != 2*2048 {
		t.Errorf("response sizes of 200s sum to %v, want %d", got, 2*2048)
	}
	if got := resp200["500"].GetSampleSum(); got != 2*float64(len(simulatedFailure)) {
		t.Errorf("response sizes of 500s sum to %v, want two %q", got, simulatedFailure)
	}
	if !strings.Contains(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("/metrics served as %q, want Prometheus text", resp.Header.Get("Content-Type"))
	}
}
