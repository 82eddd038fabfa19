package bench

import (
	"math"
	"sort"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

// Stages split a change's way from the file write to a proxy's CDS, in
// milliseconds, as means over the deliveries (means, so that the stages
// add up to the mean end to end; NaN where the subject cannot tell):
//
//	watch     the write -> the control plane has read it (its debounce has it)
//	debounce  -> the debounce let the push through
//	push      -> the proxy's config generated and written to its stream
//	send      -> the proxy received it
type Stages struct {
	Watch    float64 `json:"watchMs"`
	Debounce float64 `json:"debounceMs"`
	Push     float64 `json:"pushMs"`
	Send     float64 `json:"sendMs"`
	// Total is the mean end to end over the deliveries the stages cover.
	Total float64 `json:"totalMs"`
	// Deliveries is how many (change, proxy) deliveries were split; the
	// rest lacked a trace (the control plane merged or skipped them).
	Deliveries int `json:"deliveries"`
	// Source says where the stages come from.
	Source string `json:"source"`
}

// unknownStages has no stage known.
func unknownStages(source string) Stages {
	nan := math.NaN()
	return Stages{Watch: nan, Debounce: nan, Push: nan, Send: nan, Total: nan, Source: source}
}

// splitStages matches each change to the first push that started after
// it was written (the changes are spaced beyond a debounce, so each is
// its own push), and each delivery to that push's send to the proxy.
func splitStages(changes []churn.ChangeResult, ids []string, traces []discovery.PushTrace) Stages {
	sort.Slice(traces, func(i, j int) bool { return traces[i].Push < traces[j].Push })
	var watch, debounce, push, send, total float64
	n := 0
	for _, c := range changes {
		t := firstPushAfter(traces, c.Applied)
		if t == nil {
			continue
		}
		for i, lat := range c.Latencies {
			p := c.Receivers[i]
			if p >= len(ids) {
				continue
			}
			sent, ok := t.Sent[ids[p]]
			if !ok {
				continue
			}
			received := c.Applied.Add(lat)
			// The server notes the write when its stream's send returned,
			// which can be after the client read the response.
			if sent.After(received) {
				sent = received
			}
			watch += ms(t.Start.Sub(c.Applied))
			debounce += ms(t.Began.Sub(t.Start))
			push += ms(sent.Sub(t.Began))
			send += ms(received.Sub(sent))
			total += ms(lat)
			n++
		}
	}
	if n == 0 {
		return unknownStages("meshperf pilot's /debug/push_trace: no push matched a change")
	}
	d := float64(n)
	return Stages{Watch: watch / d, Debounce: debounce / d, Push: push / d, Send: send / d, Total: total / d,
		Deliveries: n, Source: "meshperf pilot's /debug/push_trace, per delivery"}
}

func firstPushAfter(traces []discovery.PushTrace, applied time.Time) *discovery.PushTrace {
	for i := range traces {
		if !traces[i].Start.Before(applied) {
			return &traces[i]
		}
	}
	return nil
}

// istiodStages are what istiod's own histograms say over the changes: the
// debounce from pilot_debounce_time, the push from pilot_proxy_queue_time
// plus pilot_xds_push_time (CDS); the watch and the send it does not
// measure.
func istiodStages(before, after *metrics.Snapshot) Stages {
	s := unknownStages("istiod's metrics (means): pilot_debounce_time; pilot_proxy_queue_time + pilot_xds_push_time{type=cds}; watch and send unknown")
	if before == nil || after == nil {
		return s
	}
	mean := func(name string) float64 {
		h := after.Histogram(name).Sub(before.Histogram(name))
		if h.Count == 0 {
			return math.NaN()
		}
		return 1000 * h.Sum / h.Count
	}
	s.Debounce = mean("pilot_debounce_time")
	s.Push = mean("pilot_proxy_queue_time") + cdsPushMean(before, after)
	return s
}

// cdsPushMean is the mean of pilot_xds_push_time for CDS, in milliseconds.
func cdsPushMean(before, after *metrics.Snapshot) float64 {
	h := after.HistogramWhere("pilot_xds_push_time", "type", "cds").Sub(before.HistogramWhere("pilot_xds_push_time", "type", "cds"))
	if h.Count == 0 {
		return math.NaN()
	}
	return 1000 * h.Sum / h.Count
}

// proxyIDs are the simulated proxies' IDs as the control plane knows them,
// in the fleet's order.
func proxyIDs(mesh *shape.Mesh) []string {
	out := make([]string, len(mesh.Proxies))
	for i, p := range mesh.Proxies {
		if m, err := model.ParseNodeID(p.NodeID("cluster.local")); err == nil {
			out[i] = m.ID
		}
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
