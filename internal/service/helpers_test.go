package service

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/meshperf/meshperf/internal/topology"
)

// graph runs services on loopback, each on its own port 0, and resolves
// the hostnames their calls dial ("b:8080") to those ports, as the lab's
// hosts file resolves them to Service addresses.
type graph struct {
	t        testing.TB
	mu       sync.Mutex
	addrs    map[string]string // hostname dialled -> bound address
	arrivals []string          // the peers' names, in the order calls reached them
}

func newGraph(t testing.TB) *graph { return &graph{t: t, addrs: map[string]string{}} }

func (g *graph) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	if a, ok := g.addrs[addr]; ok {
		addr = a
	}
	g.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, network, addr)
}

// listen binds a port for hostname and returns its listener.
func (g *graph) listen(hostname string) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.t.Fatal(err)
	}
	g.mu.Lock()
	g.addrs[hostname] = ln.Addr().String()
	g.mu.Unlock()
	return ln
}

// start serves svc under hostname "<name>:8080", as Serve does, and
// returns the handler and the address to send to.
func (g *graph) start(svc topology.Service, cfg Config) (*Handler, string) {
	g.t.Helper()
	cfg.Service = svc
	cfg.Dial = g.dial
	h, err := New(cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	ln := g.listen(svc.Name + ":8080")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = h.Serve(ctx, ln); close(done) }()
	g.t.Cleanup(func() { cancel(); <-done })
	return h, "http://" + ln.Addr().String()
}

// peer is a plain net/http server standing for a called service (as strict
// a parser as a sidecar's), recording what it receives.
type peer struct {
	mu       sync.Mutex
	name     string
	requests []*http.Request
	bodies   []int
	status   int
}

func (g *graph) peer(name string) *peer {
	p := &peer{name: name, status: http.StatusOK}
	ln := g.listen(name + ":8080")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		g.mu.Lock()
		g.arrivals = append(g.arrivals, p.name)
		g.mu.Unlock()
		p.mu.Lock()
		p.requests = append(p.requests, r)
		p.bodies = append(p.bodies, int(n))
		status := p.status
		p.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "from "+p.name)
	})}
	go func() { _ = srv.Serve(ln) }()
	g.t.Cleanup(func() { _ = srv.Close() })
	return p
}

// get sends a GET to url with header and returns the status and body.
func get(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func callTo(name string, size int64) topology.Step {
	return topology.Step{Call: &topology.Call{Service: name, Hostname: name + ":8080", Size: size}}
}
