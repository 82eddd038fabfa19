package xds

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/util/validation"
)

// metrics are istiod's xDS metrics, with its names, labels and buckets, so that
// Istio's dashboards and PromQL work against this server unchanged.
type metrics struct {
	clients       *prometheus.GaugeVec
	versions      versionLabels // clients' version label values
	awaiting      prometheus.Gauge
	sendTime      prometheus.Histogram
	writeTimeouts prometheus.Counter
	internalErrs  prometheus.Counter
	// deferredPushes is not istiod's: pushes not waited for because their
	// proxy was not reading (see ErrPushDeferred).
	deferredPushes prometheus.Counter
	// byType holds each served type's children, resolved once because label
	// lookups would otherwise sit on every send.
	byType map[string]*typeMetrics
}

// typeMetrics are one type's children of the labelled metrics.
type typeMetrics struct {
	pushes     prometheus.Counter
	sendErrs   prometheus.Counter
	pushTime   prometheus.Observer
	configSize prometheus.Observer
	rejects    prometheus.Counter
	expired    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	pushes := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pilot_xds_pushes",
		Help: "xDS responses sent, by type; <type>_senderr counts failed sends.",
	}, []string{"type"}))
	pushTime := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pilot_xds_push_time",
		Help:    "Seconds to generate and send one type to one proxy.",
		Buckets: []float64{.01, .1, .5, 1, 3, 5, 10, 20, 30},
	}, []string{"type"}))
	configSize := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "pilot_xds_config_size_bytes",
		Help:    "Bytes of resources in one response, by type URL.",
		Buckets: []float64{1, 1e4, 1e6, 4e6, 1e7, 4e7},
	}, []string{"type"}))
	rejects := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pilot_total_xds_rejects",
		Help: "Responses a proxy rejected (NACKs), by type.",
	}, []string{"type"}))
	expired := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pilot_xds_expired_nonce",
		Help: "Requests ignored because their nonce was not the last one sent, by type.",
	}, []string{"type"}))
	m := &metrics{
		clients: register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "pilot_xds",
			Help: "Connected xDS streams, by the proxy's Istio version.",
		}, []string{"version"})),
		// Not istiod's: how many streams wait for their first full
		// config, so that a proxy left unconfigured at scale shows.
		awaiting: register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "pilot_xds_awaiting_config",
			Help: "Connected xDS streams not yet sent a response for every type they subscribed to.",
		})),
		sendTime: register(reg, prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "pilot_xds_send_time",
			Help:    "Seconds one stream send took.",
			Buckets: []float64{.01, .1, 1, 3, 5, 10, 20, 30},
		})),
		writeTimeouts: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pilot_xds_write_timeout",
			Help: "Sends that did not finish within PILOT_XDS_SEND_TIMEOUT.",
		})),
		internalErrs: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pilot_total_xds_internal_errors",
			Help: "Configuration generation failures.",
		})),
		deferredPushes: register(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "pilot_xds_deferred_pushes",
			Help: "Pushes not waited for because their proxy was not reading what was sent before: left with the connection (merged) or still being sent, they complete when it reads, instead of holding a PILOT_PUSH_THROTTLE slot.",
		})),
		byType: make(map[string]*typeMetrics, len(pushOrder)),
	}
	for _, typeURL := range pushOrder {
		short := metricType(typeURL)
		m.byType[typeURL] = &typeMetrics{
			pushes:   pushes.WithLabelValues(short),
			sendErrs: pushes.WithLabelValues(short + "_senderr"),
			pushTime: pushTime.WithLabelValues(short),
			// istiod labels config sizes with the full type URL, unlike its
			// other metrics; dashboards written against it expect that.
			configSize: configSize.WithLabelValues(typeURL),
			rejects:    rejects.WithLabelValues(short),
			expired:    expired.WithLabelValues(short),
		}
	}
	return m
}

// register adds c to reg, or returns the collector already registered under the
// same name, so that several servers (tests, or one per listener) can share a
// registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var dup prometheus.AlreadyRegisteredError
		if errors.As(err, &dup) {
			if existing, ok := dup.ExistingCollector.(C); ok {
				return existing
			}
		}
		// Any other error means a conflicting collector under our name: ours
		// still counts, it just is not exported through reg.
	}
	return c
}

// maxVersionLabels bounds the values of pilot_xds's version label. The
// version is what each proxy says it is, and every value would stay a
// series for the life of the process, so one client connecting under a
// new version each time would grow the registry without bound. A mesh
// runs a few versions at once (two or three while it upgrades).
const maxVersionLabels = 32

// otherVersion labels the proxies whose version is past maxVersionLabels
// or not a version's shape.
const otherVersion = "other"

// versionLabels admits the first maxVersionLabels versions seen. A version
// once admitted stays so, and one refused stays refused, so that a
// connection's gauge is lowered under the label it was raised under.
type versionLabels struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

func (v *versionLabels) label(version string) string {
	if len(validation.IsValidLabelValue(version)) > 0 {
		return otherVersion
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.seen[version]; ok {
		return version
	}
	if len(v.seen) >= maxVersionLabels {
		return otherVersion
	}
	if v.seen == nil {
		v.seen = make(map[string]struct{})
	}
	v.seen[version] = struct{}{}
	return version
}
