package service

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/svcmetrics"
)

// metrics are isotope's service metrics (internal/svcmetrics, which the
// Acmeair app's services export too), under the short names the handler
// and its calls use.
type metrics struct {
	all          *svcmetrics.Metrics
	incoming     prometheus.Counter
	outgoing     *prometheus.CounterVec   // destination_service
	outgoingSize *prometheus.HistogramVec // destination_service
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m, err := svcmetrics.New(reg)
	if err != nil {
		return nil, err
	}
	return &metrics{all: m, incoming: m.Incoming, outgoing: m.Outgoing, outgoingSize: m.OutgoingSize}, nil
}

// responded records an answer's duration and body size by status.
func (m *metrics) responded(code int, d time.Duration, size int) { m.all.Responded(code, d, size) }
