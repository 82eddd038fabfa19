package kube

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// metrics are istiod's Kubernetes event counters, by the same names and
// labels (so its dashboards' queries work), and the count of objects the
// pilot refused.
type metrics struct {
	cfgEvents *prometheus.CounterVec // pilot_k8s_cfg_events{type,event}
	regEvents *prometheus.CounterVec // pilot_k8s_reg_events{type,event}
	rejects   *prometheus.CounterVec // pilot_k8s_cfg_rejected{type}
}

func newMetrics() *metrics {
	m := &metrics{
		cfgEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_k8s_cfg_events", Help: "Events from the Kubernetes config informers.",
		}, []string{"type", "event"}),
		regEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_k8s_reg_events", Help: "Events from the Kubernetes service registry informers.",
		}, []string{"type", "event"}),
		rejects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "pilot_k8s_cfg_rejected", Help: "Kubernetes objects refused because they do not validate; the last valid version of each is kept.",
		}, []string{"type"}),
	}
	return m
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.cfgEvents, m.regEvents, m.rejects}
}

func (m *metrics) configEvent(kind config.Kind, event string) {
	// istiod counts Services and Namespaces as registry events.
	if kind == config.KindService || kind == config.KindNamespace {
		m.registryEvent(string(kind), event)
		return
	}
	m.cfgEvents.WithLabelValues(string(kind), event).Inc()
}

func (m *metrics) registryEvent(kind, event string) { m.regEvents.WithLabelValues(kind, event).Inc() }

func (m *metrics) rejected(kind config.Kind) { m.rejects.WithLabelValues(string(kind)).Inc() }
