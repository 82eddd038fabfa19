package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Options configure a Fleet.
type Options struct {
	// Target is the control plane's plaintext ADS address (host:port, as
	// istiod's port 15010), spoken to over h2c (see h2conn.go).
	Target string
	// Delta selects delta ADS instead of state of the world.
	Delta bool
	// ProxiesPerConn is how many proxies share one connection (one
	// HTTP/2 connection, one stream each). A real sidecar has its own TCP
	// connection; 1, the default, does the same. Sharing saves the load
	// process memory and file descriptors, but the control plane then sees
	// fewer connections than proxies.
	ProxiesPerConn int
	// ConnectRate bounds how many proxies start their stream per second,
	// since control planes limit new streams (istiod's
	// PILOT_MAX_REQUESTS_PER_SECOND). 0 means DefaultConnectRate; negative
	// means no limit.
	ConnectRate float64
	// NackShare is the share of proxies (0..1) that reject every response of
	// NackTypes; which proxies is fixed by their index, spread evenly.
	NackShare float64
	// NackTypes are the types rejecting proxies NACK; default Route, whose
	// rejection does not change what else the proxy subscribes to.
	NackTypes []Type
	// Secrets are the SDS names each proxy asks for; nil means "default" and
	// "ROOTCA" (the workload certificate and root, as meshperf pilot serves
	// them). NoSDS asks for none: istiod leaves workload certificates to
	// istio-agent, so a proxy simulated against istiod subscribes to no SDS.
	Secrets []string
	NoSDS   bool
	// Node sets what all proxies put in their node metadata.
	Node NodeOptions
	// BackoffMin and BackoffMax bound the wait before reopening a failed
	// stream (default 100ms and 2s).
	BackoffMin, BackoffMax time.Duration
}

// DefaultConnectRate is the default ConnectRate, new streams per second.
const DefaultConnectRate = 100

func (o *Options) secrets() []string {
	switch {
	case o.NoSDS:
		return nil
	case o.Secrets == nil:
		return []string{"ROOTCA", "default"}
	}
	return o.Secrets
}

// Fleet is a set of simulated proxies against one control plane.
type Fleet struct {
	opts     Options
	proxies  []*proxy
	nackType [numTypes]bool

	mu      sync.Mutex
	conns   []*adsConn
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	start   time.Time
	started bool

	connected atomic.Int64
	synced    atomic.Int64
	syncedAll chan struct{}

	watchMu sync.Mutex
	watches atomic.Pointer[map[string]*Watch]
}

// NewFleet prepares a proxy for every spec; Start connects them.
func NewFleet(specs []ProxySpec, o Options) (*Fleet, error) {
	if o.Target == "" {
		return nil, errors.New("simulated proxies: no control plane address (Target) given")
	}
	if len(specs) == 0 {
		return nil, errors.New("simulated proxies: no proxies to simulate")
	}
	if o.NackShare < 0 || o.NackShare > 1 {
		return nil, fmt.Errorf("simulated proxies: NACK share %v is not between 0 and 1", o.NackShare)
	}
	if o.ProxiesPerConn <= 0 {
		o.ProxiesPerConn = 1
	}
	if o.ConnectRate == 0 {
		o.ConnectRate = DefaultConnectRate
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 100 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(2*time.Second, o.BackoffMin)
	}
	if o.NackTypes == nil {
		o.NackTypes = []Type{Route}
	}
	f := &Fleet{opts: o, syncedAll: make(chan struct{})}
	for _, t := range o.NackTypes {
		if t >= numTypes {
			return nil, fmt.Errorf("simulated proxies: NACK type %d is not an xDS type", t)
		}
		f.nackType[t] = true
	}
	ids := make(map[string]int, len(specs))
	for i, s := range specs {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("simulated proxy %d: %w", i, err)
		}
		node, err := s.Node(o.Node)
		if err != nil {
			return nil, err
		}
		if j, dup := ids[node.Id]; dup {
			return nil, fmt.Errorf("simulated proxies %d and %d have the same node id %q", j, i, node.Id)
		}
		ids[node.Id] = i
		p := &proxy{index: i, spec: s, fleet: f, nack: nacks(i, o.NackShare)}
		p.rec.s.Index, p.rec.s.NodeID = i, node.Id
		f.proxies = append(f.proxies, p)
	}
	return f, nil
}

// nacks spreads a share of proxies evenly over the indexes: proxy i rejects
// when the running count floor((i+1)*share) steps up at i, which selects
// exactly floor(n*share) of the first n.
func nacks(i int, share float64) bool {
	return int(float64(i+1)*share) > int(float64(i)*share)
}

// Len is the number of proxies.
func (f *Fleet) Len() int { return len(f.proxies) }

// Start connects the proxies in the background, at most ConnectRate per
// second, and returns at once; Stop ends them. It first checks that this
// process may open a connection per ProxiesPerConn proxies (see CheckFiles).
func (f *Fleet) Start(ctx context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.started {
		return errors.New("simulated proxies: already started")
	}
	// Without /proc the budget is unknown; the dials will say if it runs out.
	if b, err := OwnFiles(); err == nil {
		if err := CheckFiles(b, len(f.proxies), f.opts.ProxiesPerConn, "this process", SplitFleet); err != nil {
			return err
		}
	}
	n := connsFor(len(f.proxies), f.opts.ProxiesPerConn)
	// Connections are dialled when their first stream opens. There is no
	// limit on a response's size, as Envoy's ADS client has none: a sidecar
	// of a large mesh without Sidecar scoping gets CDS of tens of megabytes,
	// and a limit would turn that into failed streams instead of a config
	// size to report.
	for range n {
		cc, err := newADSConn(f.opts.Target)
		if err != nil {
			return fmt.Errorf("simulated proxies: %w", err)
		}
		f.conns = append(f.conns, cc)
	}
	ctx, f.cancel = context.WithCancel(ctx)
	f.started, f.start = true, time.Now()
	limit := rate.Inf
	if f.opts.ConnectRate > 0 {
		limit = rate.Limit(f.opts.ConnectRate)
	}
	limiter := rate.NewLimiter(limit, 1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for i, p := range f.proxies {
			if limiter.Wait(ctx) != nil {
				return
			}
			f.wg.Add(1)
			go func() {
				defer f.wg.Done()
				p.run(ctx, f.conns[i/f.opts.ProxiesPerConn])
			}()
		}
	}()
	return nil
}

// Stop ends every stream and connection and waits for the proxies to finish.
func (f *Fleet) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.started || f.cancel == nil {
		return
	}
	f.cancel()
	// Closing the connections first wakes proxies waiting for a stream slot
	// or send window, which do not watch ctx.
	f.closeConns()
	f.wg.Wait()
	f.cancel = nil
}

func (f *Fleet) closeConns() {
	for _, cc := range f.conns {
		cc.close()
	}
	f.conns = nil
}

func (f *Fleet) markConnected() { f.connected.Add(1) }

func (f *Fleet) markSynced() {
	if f.synced.Add(1) == int64(len(f.proxies)) {
		close(f.syncedAll)
	}
}

// Connected is how many proxies have opened a stream.
func (f *Fleet) Connected() int { return int(f.connected.Load()) }

// Synced is how many proxies have had their first complete config.
func (f *Fleet) Synced() int { return int(f.synced.Load()) }

// WaitSynced returns once every proxy has had its first complete config, or
// with ctx's error, saying how many had.
func (f *Fleet) WaitSynced(ctx context.Context) error {
	select {
	case <-f.syncedAll:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%d of %d simulated proxies had their first full config, %d connected; %s: %w",
			f.Synced(), len(f.proxies), f.Connected(), f.Unsynced(), ctx.Err())
	}
}

// Unsynced says what the proxies without a first full config lack: how many
// never opened a stream, how many wait for each type on their stream and
// how many of those never received that type at all (the control plane
// never sent it, as opposed to a stream that was reset before it came),
// and how many streams failed, with the last error.
func (f *Fleet) Unsynced() string {
	var notOpen, failed, unsynced int
	var waiting, neverSent [numTypes]int
	lastError := ""
	for _, p := range f.proxies {
		s := p.rec.snapshot()
		if !s.Synced.IsZero() {
			continue
		}
		unsynced++
		if s.Connected.IsZero() {
			notOpen++
		}
		if s.StreamErrors > 0 {
			failed++
			lastError = s.LastError
		}
		var received [numTypes]bool
		for _, r := range s.Responses {
			received[r.Type] = true
		}
		for t := range numTypes {
			if s.Waiting[t] {
				waiting[t]++
				if !received[t] {
					neverSent[t]++
				}
			}
		}
	}
	if unsynced == 0 {
		return "none is missing anything"
	}
	parts := []string{fmt.Sprintf("of the %d without, %d never opened a stream", unsynced, notOpen)}
	for _, t := range Types {
		if waiting[t] > 0 {
			parts = append(parts, fmt.Sprintf("%d wait for %s (%d never received any)", waiting[t], t, neverSent[t]))
		}
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d had streams fail (last: %s)", failed, lastError))
	}
	return strings.Join(parts, ", ")
}

// Stats returns a copy of what proxy i recorded.
func (f *Fleet) Stats(i int) ProxyStats { return f.proxies[i].rec.snapshot() }
