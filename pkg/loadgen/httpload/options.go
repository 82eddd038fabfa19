// Package httpload is the HTTP protocol of the load engine: HTTP/1.1 (and 1.0)
// over TCP or TLS, and HTTP/2 over TLS (ALPN) or cleartext (h2c), one connection
// per loadgen connection, as Fortio's fhttp is for its periodic runner.
package httpload

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/pkg/loadgen"
)

// Options are the HTTP settings of a run, with Fortio's flag meanings.
type Options struct {
	URL              string
	Method           string   // -X; "" means GET, or POST when there is a payload
	Headers          []string // -H "Name: value", in order; Host and User-Agent override ours
	Payload          []byte   // request body
	ContentType      string
	HTTP10           bool // -http1.0
	H2               bool // -h2: HTTP/2, over TLS with ALPN or cleartext h2c
	DisableKeepAlive bool // -keepalive=false: a new socket per request
	Timeout          time.Duration
	TLS              loadgen.TLSOptions
	UserAgent        string // "" means DefaultUserAgent
}

// target is a parsed URL: where to connect and what to ask for.
type target struct {
	tls        bool
	addr       string // host:port to dial
	serverName string // for TLS verification and SNI
	host       string // Host header
	requestURI string // path and query
}

func parseTarget(raw string) (target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("bad URL %q: %w", raw, err)
	}
	var t target
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		t.tls = true
		if port == "" {
			port = "443"
		}
	default:
		return target{}, fmt.Errorf("bad URL %q: the scheme must be http:// or https://", raw)
	}
	if u.Hostname() == "" {
		return target{}, fmt.Errorf("bad URL %q: no host", raw)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return target{}, fmt.Errorf("bad URL %q: port %q is not a number from 1 to 65535", raw, port)
	}
	t.addr = net.JoinHostPort(u.Hostname(), port)
	t.serverName = u.Hostname()
	t.host = u.Host
	t.requestURI = u.RequestURI()
	return t, nil
}

// method is the request method: -X, else POST with a payload, else GET.
func (o Options) method() string {
	switch {
	case o.Method != "":
		return o.Method
	case len(o.Payload) > 0:
		return "POST"
	default:
		return "GET"
	}
}

// header is one parsed -H.
type header struct{ name, value string }

func (o Options) headers() ([]header, error) {
	out := make([]header, 0, len(o.Headers))
	for _, h := range o.Headers {
		n, v, err := loadgen.ParseHeader(h)
		if err != nil {
			return nil, err
		}
		out = append(out, header{n, v})
	}
	return out, nil
}

// validate checks the options without touching the network.
func (o Options) validate() (target, []header, error) {
	t, err := parseTarget(o.URL)
	if err != nil {
		return target{}, nil, err
	}
	hs, err := o.headers()
	if err != nil {
		return target{}, nil, err
	}
	if o.H2 && o.HTTP10 {
		return target{}, nil, errors.New("-h2 and -http1.0 do not go together")
	}
	if strings.ContainsAny(o.Method, " \t\r\n") {
		return target{}, nil, fmt.Errorf("method %q has spaces or line breaks", o.Method)
	}
	return t, hs, nil
}
