package service

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"
)

// metricsPath is where isotope's service serves Prometheus; every other
// path runs the script.
const metricsPath = "/metrics"

// simulatedFailure is the body of the 500 answered at the error rate,
// isotope's words.
const simulatedFailure = "simulated failure"

var simulatedFailureBody = []byte(simulatedFailure)

// serve answers /metrics, or plays the service.
func (h *Handler) serve(ctx *fasthttp.RequestCtx) {
	if string(ctx.Path()) == metricsPath {
		h.metricsH(ctx)
		return
	}
	start := time.Now()
	h.metrics.incoming.Inc()
	// The failure comes first, before any step, as in isotope: a request
	// picked to fail costs its callers nothing downstream. Counting exactly
	// (every Nth request) keeps runs repeatable, which isotope's reset
	// counter also intends.
	if h.errorEvery > 0 && h.requests.Add(1)%h.errorEvery == 0 {
		h.respond(ctx, start, http.StatusInternalServerError, simulatedFailureBody)
		return
	}
	var trace *traceHeaders // only a script that calls forwards them
	if h.calls {
		trace = tracePool.Get().(*traceHeaders)
		trace.extract(&ctx.Request.Header)
		// Every step, concurrent ones included, is done when serve
		// returns: nothing holds the slices into the request after it.
		defer tracePool.Put(trace)
	}
	for i := range h.script {
		if err := h.script[i].run(h, trace); err != nil {
			h.log.Debug("request failed", "path", string(ctx.Path()), "err", err)
			h.respond(ctx, start, http.StatusInternalServerError, []byte(err.Error()+"\n"))
			return
		}
	}
	h.respond(ctx, start, http.StatusOK, h.response)
}

// respond writes the answer and records its duration and size by status.
// The body is not copied: the 200's is made once and only read.
func (h *Handler) respond(ctx *fasthttp.RequestCtx, start time.Time, code int, body []byte) {
	ctx.SetStatusCode(code)
	ctx.Response.Header.SetContentTypeBytes(contentType)
	ctx.Response.SetBodyRaw(body)
	h.metrics.responded(code, time.Since(start), len(body))
}

var contentType = []byte("application/octet-stream")
