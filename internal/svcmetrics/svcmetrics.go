// Package svcmetrics holds isotope's service metrics: the names, help,
// labels and buckets isotope's services export, which the lab reads to
// fill a graph run's per-service figures. `meshperf service` and the
// Acmeair app's services both export them, so the lab scrapes either alike.
package svcmetrics

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The metric names the lab reads.
const (
	IncomingRequests = "service_incoming_requests_total"
	RequestDuration  = "service_request_duration_seconds"
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

// Metrics are isotope's service metrics, names, help and labels as
// isotope's, on a registry of the caller's.
type Metrics struct {
	Incoming     prometheus.Counter
	Outgoing     *prometheus.CounterVec   // destination_service
	OutgoingSize *prometheus.HistogramVec // destination_service
	Duration     *prometheus.HistogramVec // code
	ResponseSize *prometheus.HistogramVec // code
	// ok and failed are the code="200" and code="500" series, the codes
	// isotope's services answer with, resolved once.
	ok, failed codeSeries
}

type codeSeries struct{ duration, size prometheus.Observer }

// New registers the metrics on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Incoming: prometheus.NewCounter(prometheus.CounterOpts{
			Name: IncomingRequests,
			Help: "Number of requests sent to this service.",
		}),
		Outgoing: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "service_outgoing_requests_total",
			Help: "Number of requests sent from this service.",
		}, []string{"destination_service"}),
		OutgoingSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "service_outgoing_request_size",
			Help:    "Size in bytes of requests sent from this service.",
			Buckets: sizeBuckets,
		}, []string{"destination_service"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    RequestDuration,
			Help:    "Duration in seconds it took to serve requests to this service.",
			Buckets: durationBuckets,
		}, []string{"code"}),
		ResponseSize: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "service_response_size",
			Help:    "Size in bytes of responses sent from this service.",
			Buckets: sizeBuckets,
		}, []string{"code"}),
	}
	for _, c := range []prometheus.Collector{m.Incoming, m.Outgoing, m.OutgoingSize, m.Duration, m.ResponseSize} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	m.ok = m.series(http.StatusOK)
	m.failed = m.series(http.StatusInternalServerError)
	return m, nil
}

func (m *Metrics) series(code int) codeSeries {
	c := strconv.Itoa(code)
	return codeSeries{m.Duration.WithLabelValues(c), m.ResponseSize.WithLabelValues(c)}
}

// Responded records an answer's duration and body size by status.
func (m *Metrics) Responded(code int, d time.Duration, size int) {
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
