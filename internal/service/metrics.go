package service

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// isotope's buckets, so that its dashboards' quantiles read the same:
// durations from 7 ms (a hop of its original GKE runs) to 500 ms; sizes
// in powers of ten from 1 B to 1 GB.
var (
	durationBuckets = []float64{
		0.007, 0.008, 0.009, 0.01, 0.011, 0.012, 0.014, 0.016, 0.018, 0.02, 0.025,
		0.03, 0.035, 0.04, 0.045, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1, 0.12, 0.14,
		0.16, 0.18, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	}
	sizeBuckets = prometheus.ExponentialBuckets(1, 10, 10)
)

// metrics are isotope's service metrics, names, help and labels as
// isotope's, on a registry of the caller's.
type metrics struct {
	incoming     prometheus.Counter
	outgoing     *prometheus.CounterVec   // destination_service
	outgoingSize *prometheus.HistogramVec // destination_service
	duration     *prometheus.HistogramVec // code
	responseSize *prometheus.HistogramVec // code
	// ok and failed are the code="200" and code="500" series, the only
	// codes the service answers with, resolved once.
	ok, failed codeSeries
}

type codeSeries struct{ duration, size prometheus.Observer }

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		incoming: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "service_incoming_requests_total",
			Help: "Number of requests sent to this service.",
		}),
		outgoing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "service_outgoing_requests_total",
			Help: "Number of requests sent from this service.",
		}, []string{"destination_service"}),
		outgoingSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "service_outgoing_request_size",
			Help:    "Size in bytes of requests sent from this service.",
			Buckets: sizeBuckets,
		}, []string{"destination_service"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "service_request_duration_seconds",
			Help:    "Duration in seconds it took to serve requests to this service.",
			Buckets: durationBuckets,
		}, []string{"code"}),
		responseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "service_response_size",
			Help:    "Size in bytes of responses sent from this service.",
			Buckets: sizeBuckets,
		}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.incoming, m.outgoing, m.outgoingSize, m.duration, m.responseSize} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.ok = m.series(http.StatusOK)
	m.failed = m.series(http.StatusInternalServerError)
	return m, nil
}

func (m *metrics) series(code int) codeSeries {
	c := strconv.Itoa(code)
	return codeSeries{m.duration.WithLabelValues(c), m.responseSize.WithLabelValues(c)}
}

// responded records an answer's duration and body size by status.
func (m *metrics) responded(code int, d time.Duration, size int) {
	var s codeSeries
	switch code {
	case http.StatusOK:
		s = m.ok
	case http.StatusInternalServerError:
		s = m.failed
	default:
		s = m.series(code)
	}
	s.duration.Observe(d.Seconds())
	s.size.Observe(float64(size))
}
