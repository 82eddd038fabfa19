// Package tcpload is the TCP echo protocol of the load engine: each request
// writes a payload and waits for the same bytes to come back, as Fortio's tcp://
// load does against an echo server.
package tcpload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen"
)

// DefaultPayload is sent when no payload is given.
var DefaultPayload = []byte("meshperf tcp echo\n")

// Codes of a TCP run: OK when the echo came back intact.
const codeOK = 0

// Options are the TCP settings of a run.
type Options struct {
	Target  string // tcp://host:port
	Payload []byte // echoed each request; DefaultPayload when empty
	Timeout time.Duration
}

// Result is a TCP run's result in Fortio's JSON shape (its TCPResultMap).
type Result struct {
	loadgen.RunResult
	Destination      string
	Payload          []byte
	UnixDomainSocket string
	ReqTimeout       time.Duration
	RetCodes         map[string]int64
	SocketCount      int
	BytesSent        int64
	BytesReceived    int64
}

// Load is a prepared TCP run.
type Load struct {
	opts   Options
	load   loadgen.Options
	runner *loadgen.Runner
	conns  []*loadgen.WireConnStats
}

// ParseTarget checks a tcp://host:port target and returns host:port.
func ParseTarget(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme != "tcp" || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", fmt.Errorf("bad TCP target %q: want tcp://host:port", target)
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("bad TCP target %q: want a port from 1 to 65535", target)
	}
	return u.Host, nil
}

// New checks the options and prepares the run on the event loop.
func New(o Options, lo loadgen.Options) (*Load, error) {
	addr, err := ParseTarget(o.Target)
	if err != nil {
		return nil, err
	}
	if len(o.Payload) == 0 {
		o.Payload = DefaultPayload
	}
	r, stats, err := loadgen.NewWireRunner(lo, echoWire{o.Payload}, loadgen.WireTarget{Addr: addr, Timeout: o.Timeout})
	if errors.Is(err, loadgen.ErrNoEventLoop) {
		return nil, errors.New("tcp:// load needs Linux")
	}
	if err != nil {
		return nil, err
	}
	return &Load{opts: o, load: lo, runner: r, conns: stats}, nil
}

// Runner is the engine driving this load, for progress display.
func (l *Load) Runner() *loadgen.Runner { return l.runner }

// Run runs the load and returns its result.
func (l *Load) Run(ctx context.Context, d loadgen.Describe) (*Result, error) {
	s, err := l.runner.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.opts.Target, err)
	}
	d.RunType = "TCP"
	r := &Result{
		RunResult:   loadgen.NewRunResult(d, l.load, s),
		Destination: l.opts.Target,
		Payload:     l.opts.Payload,
		ReqTimeout:  l.opts.Timeout,
		RetCodes:    map[string]int64{},
	}
	for code, n := range s.Codes {
		r.RetCodes[CodeName(code)] += n
	}
	received := histogram.New(histogram.Bytes)
	for _, c := range l.conns {
		r.SocketCount += c.Sockets
		received.Merge(c.Sizes)
	}
	r.BytesReceived = int64(received.Sum())
	r.BytesSent = s.Calls * int64(len(l.opts.Payload))
	return r, nil
}

// CodeName is how a TCP outcome is counted in RetCodes.
func CodeName(code int) string {
	if code == codeOK {
		return "OK"
	}
	return strconv.Itoa(code)
}

// echoWire sends the payload and expects it back, byte for byte.
type echoWire struct{ payload []byte }

func (w echoWire) Request() []byte { return w.payload }

func (w echoWire) NewParser() loadgen.ResponseParser { return &echoParser{payload: w.payload} }

type echoParser struct {
	payload []byte
	got     int
}

var errEchoMismatch = errors.New("the echo differs from what was sent")

func (p *echoParser) Feed(b []byte) (int, bool, loadgen.Outcome, error) {
	n := min(len(b), len(p.payload)-p.got)
	if !bytes.Equal(b[:n], p.payload[p.got:p.got+n]) {
		return n, false, loadgen.Outcome{}, errEchoMismatch
	}
	p.got += n
	if p.got < len(p.payload) {
		return n, false, loadgen.Outcome{}, nil
	}
	return n, true, loadgen.Outcome{Code: codeOK, OK: true}, nil
}

func (p *echoParser) PeerClosed() (bool, loadgen.Outcome) { return false, loadgen.Outcome{} }
func (p *echoParser) KeepAlive() bool                     { return true }
func (p *echoParser) Sizes() (int64, int64)               { return int64(p.got), 0 }
func (p *echoParser) Reset()                              { p.got = 0 }
