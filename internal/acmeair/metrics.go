package acmeair

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meshperf/meshperf/internal/svcmetrics"
)

// metricsPath is where every service serves its metrics, as isotope's do.
const metricsPath = "/metrics"

// instrument counts every request the service answers in isotope's service
// metrics, which the lab reads for its per-service figures, and serves them
// on GET /metrics; a scrape is not counted, so the figures are the load's.
func instrument(h http.Handler, m *svcmetrics.Metrics, reg prometheus.Gatherer) http.Handler {
	scrape := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == metricsPath && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			scrape.ServeHTTP(w, r)
			return
		}
		m.Incoming.Inc()
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		m.Responded(rec.status(), time.Since(start), rec.size)
	})
}

// recorder keeps an answer's status and body size.
type recorder struct {
	http.ResponseWriter
	code int // 0 until the header is written
	size int
}

func (r *recorder) WriteHeader(code int) {
	// A 1xx is not the answer; the first final status is.
	if r.code == 0 && code >= 200 {
		r.code = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.size += n
	return n, err
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// status is the answer's status: 200 when the handler wrote nothing, as
// net/http answers then.
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}

// peer is a service this one calls, and the outgoing metrics of those
// calls, labelled with the service's name as isotope labels a call with
// the service it calls.
type peer struct {
	client *http.Client
	sent   prometheus.Counter
	size   prometheus.Observer
}

func newPeer(c *http.Client, m *svcmetrics.Metrics, service string) peer {
	return peer{client: c, sent: m.Outgoing.WithLabelValues(service), size: m.OutgoingSize.WithLabelValues(service)}
}
