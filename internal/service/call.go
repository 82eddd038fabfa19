package service

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/topology"
)

// call is one outbound request of the script, prepared at start: its
// request (URL, Host, extra headers) is a template each request copies,
// its body is shared (requests only read it) and its metric series are
// resolved.
type call struct {
	hostname    string
	template    *http.Request
	extra       http.Header
	body        []byte
	probability int // percent; 0 always
	sent        prometheus.Counter
	size        prometheus.Observer
}

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
	tmpl, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+c.Hostname+"/", nil)
	if err != nil {
		return nil, fmt.Errorf("call to %s: hostname %q: %w", c.Service, c.Hostname, err)
	}
	if tmpl.URL.Hostname() == "" {
		return nil, fmt.Errorf("call to %s: hostname %q: no host", c.Service, c.Hostname)
	}
	extra := make(http.Header, len(c.ExtraHeader))
	for k, v := range c.ExtraHeader {
		extra[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
	}
	// isotope labels its outgoing series with the hostname dialled.
	return &call{
		hostname:    c.Hostname,
		template:    tmpl,
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
func (c *call) do(ctx context.Context, h *Handler, trace *traceHeaders) error {
	if c.probability > 0 && h.chance(100) >= c.probability {
		return nil
	}
	req := c.template.WithContext(ctx)
	req.Header = make(http.Header, len(c.extra)+len(trace))
	for k, v := range c.extra {
		req.Header[k] = v
	}
	trace.apply(req.Header)
	if len(c.body) > 0 {
		req.ContentLength = int64(len(c.body))
		req.Body = io.NopCloser(bytes.NewReader(c.body))
		// A keep-alive connection the peer closed meanwhile is retried
		// on a new one, which needs the body again.
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(c.body)), nil }
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return fmt.Errorf("call to %s: %w", c.hostname, err)
	}
	c.sent.Inc()
	c.size.Observe(float64(len(c.body)))
	if resp.StatusCode/100 == 2 {
		// Drained, the connection goes back to the pool for the next call.
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	_ = resp.Body.Close()
	return fmt.Errorf("service %s responded with %s (body: %s)", c.hostname, resp.Status, bytes.TrimSpace(body))
}

// maxErrorBody bounds what a failed call's answer contributes to ours: a
// chain of failures nests each hop's text in the next.
const maxErrorBody = 4 << 10
