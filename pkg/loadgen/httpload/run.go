package httpload

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// Result is an HTTP run's result in Fortio's JSON shape (its HTTPRunnerResults):
// the common part, then the HTTP fields in Fortio's order.
type Result struct {
	loadgen.RunResult
	RetCodes          map[int]int64
	IPCountMap        map[string]int
	Insecure          bool
	MTLS              bool
	CACert            string
	Cert              string
	Key               string
	UnixDomainSocket  string
	URL               string
	NumConnections    int
	Compression       bool
	DisableFastClient bool
	HTTP10            bool
	H2                bool
	DisableKeepAlive  bool
	AllowHalfClose    bool
	FollowRedirects   bool
	Resolve           string
	HTTPReqTimeOut    time.Duration
	UserCredentials   string
	ContentType       string
	Payload           []byte
	MethodOverride    string
	LogErrors         bool
	SequentialWarmup  bool
	ConnReuseRange    [2]int
	NoResolveEachConn bool
	Offset            time.Duration
	Resolution        float64
	Sizes             histogram.Data
	HeaderSizes       histogram.Data
	Sockets           []int
	SocketCount       int
	ConnectionStats   histogram.Data
	AbortOn           int
}

// Load is a prepared HTTP run.
type Load struct {
	opts   Options
	load   loadgen.Options
	runner *loadgen.Runner
	conns  []connStats
	close  func()
}

// connStats are where one connection keeps what the result reports about it.
type connStats struct {
	sockets            *loadgen.SocketStats
	sizes, headerSizes *histogram.Histogram
}

// New checks the options and prepares one connection per lo.Connections; nothing
// is dialled until Run. Plain HTTP/1.x runs on the event loop (the cheap path);
// TLS and HTTP/2 run a goroutine per connection with Go's TLS and HTTP/2 stacks.
func New(o Options, lo loadgen.Options) (*Load, error) {
	t, hs, err := o.validate()
	if err != nil {
		return nil, err
	}
	l := &Load{opts: o, load: lo, close: func() {}}
	if !t.tls && !o.H2 {
		w := wire{request: wireRequest(o, t, hs), headOnly: o.method() == "HEAD", forceClose: o.DisableKeepAlive}
		r, stats, err := loadgen.NewWireRunner(lo, w, loadgen.WireTarget{Addr: t.addr, Timeout: o.Timeout})
		if err == nil {
			l.runner = r
			for _, s := range stats {
				l.conns = append(l.conns, connStats{&s.SocketStats, s.Sizes, s.HeaderSizes})
			}
			return l, nil
		}
		if !errors.Is(err, loadgen.ErrNoEventLoop) {
			return nil, err
		}
	}
	if err := l.prepareCallers(o, lo, t, hs); err != nil {
		return nil, err
	}
	return l, nil
}

// prepareCallers sets up a goroutine-driven connection per lo.Connections.
func (l *Load) prepareCallers(o Options, lo loadgen.Options, t target, hs []header) error {
	var tlsConfig *tls.Config
	if t.tls {
		alpn := "http/1.1"
		if o.H2 {
			alpn = "h2"
		}
		var err error
		if tlsConfig, err = o.TLS.Config(t.serverName, alpn); err != nil {
			return err
		}
	}
	callers := make([]loadgen.Caller, lo.Connections)
	var closers []func()
	for i := range callers {
		d := loadgen.NewDialer(o.Timeout, tlsConfig.Clone())
		if o.H2 {
			c, err := newHTTP2Conn(o, t, hs, d)
			if err != nil {
				return err
			}
			callers[i], closers = c, append(closers, c.close)
			l.conns = append(l.conns, connStats{&d.SocketStats, c.sizes, c.headerSizes})
			continue
		}
		c := newHTTP1Conn(o, t, hs, d)
		callers[i], closers = c, append(closers, c.close)
		l.conns = append(l.conns, connStats{&d.SocketStats, c.sizes, c.headerSizes})
	}
	l.close = func() {
		for _, f := range closers {
			f()
		}
	}
	var err error
	l.runner, err = loadgen.NewRunner(lo, callers)
	return err
}

// Runner is the engine driving this load, for progress display.
func (l *Load) Runner() *loadgen.Runner { return l.runner }

// Run runs the load and returns its result; d describes it for the JSON.
func (l *Load) Run(ctx context.Context, d loadgen.Describe) (*Result, error) {
	defer l.close()
	s, err := l.runner.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.opts.URL, err)
	}
	d.RunType = "HTTP"
	r := &Result{
		RunResult:        loadgen.NewRunResult(d, l.load, s),
		RetCodes:         s.Codes,
		IPCountMap:       map[string]int{},
		Insecure:         l.opts.TLS.Insecure,
		MTLS:             l.opts.TLS.MTLS(),
		CACert:           l.opts.TLS.CACert,
		Cert:             l.opts.TLS.Cert,
		Key:              l.opts.TLS.Key,
		URL:              l.opts.URL,
		NumConnections:   1, // Fortio's meaning: connections per client; -c is NumThreads
		HTTP10:           l.opts.HTTP10,
		H2:               l.opts.H2,
		DisableKeepAlive: l.opts.DisableKeepAlive,
		HTTPReqTimeOut:   l.opts.Timeout,
		ContentType:      l.opts.ContentType,
		Payload:          l.opts.Payload,
		MethodOverride:   l.opts.Method,
		AbortOn:          l.load.AbortOn,
	}
	sizes, headerSizes := histogram.New(histogram.Bytes), histogram.New(histogram.Bytes)
	connect := histogram.New(histogram.Latency)
	for _, c := range l.conns {
		sizes.Merge(c.sizes)
		headerSizes.Merge(c.headerSizes)
		connect.Merge(c.sockets.ConnectTime)
		for addr, n := range c.sockets.Addresses {
			r.IPCountMap[addr] += n
		}
		r.Sockets = append(r.Sockets, c.sockets.Sockets)
		r.SocketCount += c.sockets.Sockets
	}
	r.Sizes = sizes.Export(1, nil)
	r.HeaderSizes = headerSizes.Export(1, nil)
	r.ConnectionStats = connect.Export(1e-9, d.Percentiles)
	return r, nil
}
