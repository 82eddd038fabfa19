package service

import (
	"net/http"
	"strconv"
	"time"
)

// metricsPath is where isotope's service serves Prometheus; every other
// path runs the script.
const metricsPath = "/metrics"

// simulatedFailure is the body of the 500 answered at the error rate,
// isotope's words.
const simulatedFailure = "simulated failure"

// ServeHTTP answers /metrics, or plays the service.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == metricsPath {
		h.metricsH.ServeHTTP(w, r)
		return
	}
	start := time.Now()
	h.metrics.incoming.Inc()
	// The failure comes first, before any step, as in isotope: a request
	// picked to fail costs its callers nothing downstream. Counting exactly
	// (every Nth request) keeps runs repeatable, which isotope's reset
	// counter also intends.
	if h.errorEvery > 0 && h.requests.Add(1)%h.errorEvery == 0 {
		h.respond(w, start, http.StatusInternalServerError, []byte(simulatedFailure))
		return
	}
	var trace *traceHeaders // only a script that calls forwards them
	if h.calls {
		trace = new(traceHeaders)
		trace.extract(r.Header)
	}
	for i := range h.script {
		if err := h.script[i].run(r.Context(), h, trace); err != nil {
			h.log.Debug("request failed", "path", r.URL.Path, "err", err)
			h.respond(w, start, http.StatusInternalServerError, []byte(err.Error()+"\n"))
			return
		}
	}
	h.respond(w, start, http.StatusOK, h.response)
}

// respond writes the answer and records its duration and size by status.
func (h *Handler) respond(w http.ResponseWriter, start time.Time, code int, body []byte) {
	hdr := w.Header()
	// Saying the type and length spares net/http sniffing the body and
	// chunking it.
	hdr["Content-Type"] = contentType
	if code == http.StatusOK {
		hdr["Content-Length"] = h.responseLength
	} else {
		hdr["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	w.WriteHeader(code)
	n, _ := w.Write(body) // a caller that went away is not the service's failure
	h.metrics.responded(code, time.Since(start), n)
}

var contentType = []string{"application/octet-stream"}
