package service

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/meshperf/meshperf/internal/hosts"
)

// maxIdlePerPeer is how many idle connections the service keeps to each
// service it calls. Go's default of 2 would make a service under more than
// two concurrent requests open and close a connection per call (isotope
// leaves it at 0, Go's default, unless told); each idle connection costs
// about 10 KB of buffers, so a few hundred stay within a small process.
const maxIdlePerPeer = 256

// newClient is the one client a service calls its peers with: HTTP/1.1
// keep-alive (isotope's protocol, and what a sidecar expects of an app),
// never a proxy from the environment (the mesh is the proxy), no
// compression (isotope's bodies are random bytes).
func newClient(dial func(ctx context.Context, network, addr string) (net.Conn, error), table *hosts.Table) *http.Client {
	if dial == nil {
		d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
		dial = d.DialContext
		if table != nil {
			dial = table.Dialer(d)
		}
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           dial,
			MaxIdleConns:          0, // no overall cap: per peer is the bound
			MaxIdleConnsPerHost:   maxIdlePerPeer,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
			ExpectContinueTimeout: 0,
		},
		// A redirect is an answer like any other: isotope's services
		// never send one, and following it would hide it.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
