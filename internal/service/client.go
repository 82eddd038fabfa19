package service

import (
	"context"
	"net"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshperf/meshperf/internal/hosts"
)

// maxConnsPerPeer bounds the connections the service opens to each service
// it calls; a call finding them all busy waits for one (maxConnWait)
// rather than failing, as net/http's unbounded pool would have opened
// another. isotope's callers rarely hold more than a few dozen at once.
const (
	maxConnsPerPeer = 1024
	maxConnWait     = 10 * time.Second
	dialTimeout     = 5 * time.Second
)

// newClient is the one client a service calls its peers with: HTTP/1.1
// keep-alive (isotope's protocol, and what a sidecar expects of an app),
// never a proxy from the environment (the mesh is the proxy). fasthttp
// writes the request and reads the answer on the calling goroutine, where
// net/http hands each call to two goroutines per connection: most of a
// hop's CPU beside the syscalls.
func newClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), table *hosts.Table) *fasthttp.Client {
	if dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		dial = d.DialContext
		if table != nil {
			dial = table.Dialer(d)
		}
	}
	return &fasthttp.Client{
		Dial: func(addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
			defer cancel()
			return dial(ctx, "tcp", addr)
		},
		MaxConnsPerHost:     maxConnsPerPeer,
		MaxConnWaitTimeout:  maxConnWait,
		MaxIdleConnDuration: 90 * time.Second,
		// A User-Agent would be bytes on every hop that no service reads.
		NoDefaultUserAgentHeader: true,
	}
}
