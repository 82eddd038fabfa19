package service

import (
	"sync"

	"github.com/valyala/fasthttp"
)

// tracedHeaders are the headers a service copies from the request it serves
// to every call it makes, so that a tracer (Zipkin, Jaeger, Lightstep,
// Datadog, W3C, Cloud Trace, gRPC's binary context) sees one trace across
// the graph: isotope's list, plus B3's single header ("b3"), which Envoy
// and Istio's sidecars also send. Header names are case-insensitive;
// these are the canonical forms the calls send.
var tracedHeaders = [...]string{
	"X-Request-Id",
	"X-B3-Traceid",
	"X-B3-Spanid",
	"X-B3-Parentspanid",
	"X-B3-Sampled",
	"X-B3-Flags",
	"B3",
	"X-Ot-Span-Context",
	"X-Datadog-Trace-Id",
	"X-Datadog-Parent-Id",
	"X-Datadog-Sampling-Priority",
	"Traceparent",
	"Tracestate",
	"X-Cloud-Trace-Context",
	"Grpc-Trace-Bin",
}

// traceHeaders holds the inbound request's values of tracedHeaders, by
// index: a fixed array of slices into the request, so that extracting them
// allocates nothing. They are valid while the request is served, which is
// as long as its calls last. A header sent twice forwards its first value
// (none of these may be repeated).
type traceHeaders [len(tracedHeaders)][]byte

// tracePool recycles traceHeaders: they escape to the concurrent steps'
// goroutines, and a new one per request would be the service's only
// allocation.
var tracePool = sync.Pool{New: func() any { return new(traceHeaders) }}

func (t *traceHeaders) extract(h *fasthttp.RequestHeader) {
	for i, name := range tracedHeaders {
		t[i] = h.Peek(name)
	}
}

// apply sets the traced headers present on an outbound request's header,
// over any extra header of the same name, as isotope does.
func (t *traceHeaders) apply(h *fasthttp.RequestHeader) {
	for i, v := range t {
		if len(v) > 0 {
			h.SetBytesV(tracedHeaders[i], v)
		}
	}
}
