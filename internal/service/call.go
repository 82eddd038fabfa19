package service

import (
	"bytes"
	"fmt"
	"net/url"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/meshperf/meshperf/internal/topology"
)

// call is one outbound request of the script, prepared at start: its URL
// (whose host is the Host header), its extra headers and its body, shared
// by every request (requests only read it), and its metric series.
type call struct {
	hostname    string
	uri         string
	extra       []header
	body        []byte
	probability int // percent; 0 always
	sent        prometheus.Counter
	size        prometheus.Observer
}

type header struct{ name, value string }

func newCall(c topology.Call, m *metrics) (*call, error) {
	if c.Hostname == "" {
		return nil, fmt.Errorf("call to %s: no hostname", c.Service)
	}
	if c.Size < 0 {
		return nil, fmt.Errorf("call to %s: negative size %d", c.Service, c.Size)
	}
	if c.Probability < 0 || c.Probability > 100 {
		return nil, fmt.Errorf("call to %s: probability %d is not 0..100", c.Service, c.Probability)
	}
	// isotope dials "http://" + hostname, so the Host header is the
	// hostname as written, port included ("b:8080"): a mesh routes on it.
	uri := "http://" + c.Hostname + "/"
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("call to %s: hostname %q: %w", c.Service, c.Hostname, err)
	}
	if u.Hostname() == "" || u.Host != c.Hostname {
		return nil, fmt.Errorf("call to %s: hostname %q: not a host or host:port", c.Service, c.Hostname)
	}
	extra := make([]header, 0, len(c.ExtraHeader))
	for k, v := range c.ExtraHeader {
		extra = append(extra, header{k, v})
	}
	// isotope labels its outgoing series with the hostname dialled.
	return &call{
		hostname:    c.Hostname,
		uri:         uri,
		extra:       extra,
		body:        randomBytes(c.Size),
		probability: c.Probability,
		sent:        m.outgoing.WithLabelValues(c.Hostname),
		size:        m.outgoingSize.WithLabelValues(c.Hostname),
	}, nil
}

// do makes the call, unless its probability says to skip it. A transport
// error or an answer other than 2xx is the service's failure, its text
// the 500's body.
func (c *call) do(h *Handler, trace *traceHeaders) error {
	if c.probability > 0 && h.chance(100) >= c.probability {
		return nil
	}
	req := fasthttp.AcquireRequest()
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(c.uri)
	for _, x := range c.extra {
		req.Header.Set(x.name, x.value)
	}
	trace.apply(&req.Header)
	// Not copied: the body outlives the request, and the client only
	// reads it (again, when it retries on a keep-alive connection the peer
	// closed meanwhile).
	req.SetBodyRaw(c.body)
	if err := h.client.Do(req, resp); err != nil {
		return fmt.Errorf("call to %s: %w", c.hostname, err)
	}
	c.sent.Inc()
	c.size.Observe(float64(len(c.body)))
	code := resp.StatusCode()
	if code/100 == 2 {
		return nil
	}
	body := resp.Body()
	if len(body) > maxErrorBody {
		body = body[:maxErrorBody]
	}
	return fmt.Errorf("service %s responded with %d %s (body: %s)", c.hostname, code, fasthttp.StatusMessage(code), bytes.TrimSpace(body))
}

// maxErrorBody bounds what a failed call's answer contributes to ours: a
// chain of failures nests each hop's text in the next.
const maxErrorBody = 4 << 10
