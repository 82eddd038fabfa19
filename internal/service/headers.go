package service

import "net/http"

// tracedHeaders are the headers a service copies from the request it serves
// to every call it makes, so that a tracer (Zipkin, Jaeger, Lightstep,
// Datadog, W3C, Cloud Trace, gRPC's binary context) sees one trace across
// the graph: isotope's list, plus B3's single header ("b3"), which Envoy
// and Istio's sidecars also send. In canonical form, so that a lookup in a
// request's Header (which net/http canonicalises) needs no conversion.
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
// index: a fixed array, so that extracting them allocates nothing.
type traceHeaders [len(tracedHeaders)][]string

func (t *traceHeaders) extract(h http.Header) {
	for i, name := range tracedHeaders {
		t[i] = h[name]
	}
}

// apply sets the traced headers present on an outbound request's header,
// over any extra header of the same name, as isotope does.
func (t *traceHeaders) apply(h http.Header) {
	for i, v := range t {
		if len(v) > 0 {
			h[tracedHeaders[i]] = v
		}
	}
}
