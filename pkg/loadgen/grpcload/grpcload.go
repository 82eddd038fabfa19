// Package grpcload is the gRPC protocol of the load engine: the standard
// grpc.health.v1 Check, or the echo server's ping (wire-compatible with
// Fortio's), over -c connections with -s streams each.
package grpcload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/meshperf/meshperf/pkg/loadgen"
	"github.com/meshperf/meshperf/pkg/pingpb"
)

// Options are the gRPC settings of a run.
type Options struct {
	Target  string // host:port, or https://host:port for TLS
	Ping    bool   // ping service instead of health
	Payload []byte // ping payload
	// Headers are -H "Name: value" lines, sent as metadata on every call;
	// as in Fortio, Host sets the :authority and User-Agent the user agent.
	Headers       []string
	PingDelay     time.Duration
	HealthService string
	Streams       int // per connection; calls in flight on each
	Timeout       time.Duration
	TLS           loadgen.TLSOptions
	UseTLS        bool // TLS without the https:// prefix (set by -cacert, -cert, -k)
}

// Result is a gRPC run's result in Fortio's JSON shape (its GRPCRunnerResults).
type Result struct {
	loadgen.RunResult
	RetCodes    map[string]int64
	Destination string
	Streams     int
	Ping        bool
	Metadata    map[string][]string
}

// errorCode is how a failed call is counted, Fortio's "ERROR".
const errorCode = -1

// CodeName is how an outcome is counted in RetCodes: the health status name
// (a ping that answered counts as SERVING, as in Fortio), or ERROR.
func CodeName(code int) string {
	if code == errorCode {
		return "ERROR"
	}
	return healthpb.HealthCheckResponse_ServingStatus(code).String()
}

// Load is a prepared gRPC run.
type Load struct {
	opts     Options
	metadata metadata.MD // sent on every call; nil without -H
	load     loadgen.Options
	runner   *loadgen.Runner
	conns    []*grpc.ClientConn
}

// New prepares connections (dialled lazily on the first call) and the runner:
// lo.Connections connections, each carrying o.Streams callers.
func New(o Options, lo loadgen.Options) (*Load, error) {
	addr, useTLS := o.Target, o.UseTLS
	if rest, ok := strings.CutPrefix(addr, "https://"); ok {
		addr, useTLS = rest, true
	}
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "http://"), "/")
	if addr == "" || strings.Contains(addr, "/") {
		return nil, fmt.Errorf("bad gRPC target %q: want host:port", o.Target)
	}
	creds := insecure.NewCredentials()
	if useTLS {
		cfg, err := o.TLS.Config(hostOf(addr), "h2")
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	dialOpts, md, err := headerOptions(o.Headers)
	if err != nil {
		return nil, err
	}
	dialOpts = append(dialOpts, grpc.WithTransportCredentials(creds))
	streams := max(o.Streams, 1)
	l := &Load{opts: o, load: lo, metadata: md}
	var callers []loadgen.Caller
	for range lo.Connections {
		cc, err := grpc.NewClient(addr, dialOpts...)
		if err != nil {
			l.closeAll()
			return nil, fmt.Errorf("gRPC target %q: %w", o.Target, err)
		}
		l.conns = append(l.conns, cc)
		for range streams {
			callers = append(callers, l.newCaller(cc))
		}
	}
	l.load.Connections = len(callers)
	if l.runner, err = loadgen.NewRunner(l.load, callers); err != nil {
		l.closeAll()
		return nil, err
	}
	return l, nil
}

func (l *Load) newCaller(cc *grpc.ClientConn) loadgen.Caller {
	if l.opts.Ping {
		return &pingCaller{client: pingpb.NewPingServerClient(cc), opts: l.opts, md: l.metadata, payload: pingPayload(l.opts.Payload)}
	}
	return &healthCaller{client: healthpb.NewHealthClient(cc), opts: l.opts, md: l.metadata}
}

// headerOptions turns -H lines into what gRPC sends: Host becomes the
// :authority (so a sidecar routes the call by the service's name, as for
// HTTP) and User-Agent the user agent, both dial options; every other
// header is metadata on each call. This is Fortio's mapping.
func headerOptions(headers []string) ([]grpc.DialOption, metadata.MD, error) {
	var opts []grpc.DialOption
	var md metadata.MD
	for _, h := range headers {
		name, value, err := loadgen.ParseHeader(h)
		if err != nil {
			return nil, nil, err
		}
		switch strings.ToLower(name) {
		case "host":
			opts = append(opts, grpc.WithAuthority(value))
		case "user-agent":
			opts = append(opts, grpc.WithUserAgent(value))
		default:
			if md == nil {
				md = metadata.MD{}
			}
			md.Append(name, value)
		}
	}
	return opts, md, nil
}

// withMetadata attaches the -H metadata to a call's context.
func withMetadata(ctx context.Context, md metadata.MD) context.Context {
	if md == nil {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, md)
}

// Runner is the engine driving this load, for progress display.
func (l *Load) Runner() *loadgen.Runner { return l.runner }

// Run runs the load and returns its result.
func (l *Load) Run(ctx context.Context, d loadgen.Describe) (*Result, error) {
	defer l.closeAll()
	s, err := l.runner.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", l.opts.Target, err)
	}
	d.RunType = "GRPC Health"
	if l.opts.Ping {
		d.RunType = "GRPC Ping"
	}
	r := &Result{
		RunResult:   loadgen.NewRunResult(d, l.load, s),
		RetCodes:    map[string]int64{},
		Destination: l.opts.Target,
		Streams:     max(l.opts.Streams, 1),
		Ping:        l.opts.Ping,
	}
	for code, n := range s.Codes {
		r.RetCodes[CodeName(code)] += n
	}
	return r, nil
}

func (l *Load) closeAll() {
	for _, cc := range l.conns {
		_ = cc.Close()
	}
	l.conns = nil
}

func hostOf(addr string) string {
	if i := strings.LastIndex(addr, ":"); i > 0 {
		return strings.Trim(addr[:i], "[]")
	}
	return addr
}

// withTimeout bounds one call by -timeout.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

type healthCaller struct {
	client healthpb.HealthClient
	opts   Options
	md     metadata.MD
}

func (c *healthCaller) Call(ctx context.Context) loadgen.Outcome {
	ctx, cancel := withTimeout(withMetadata(ctx, c.md), c.opts.Timeout)
	defer cancel()
	resp, err := c.client.Check(ctx, &healthpb.HealthCheckRequest{Service: c.opts.HealthService})
	if err != nil {
		return loadgen.Outcome{Code: errorCode, Err: err}
	}
	st := resp.GetStatus()
	return loadgen.Outcome{Code: int(st), OK: st == healthpb.HealthCheckResponse_SERVING}
}

type pingCaller struct {
	client  pingpb.PingServerClient
	opts    Options
	md      metadata.MD
	payload string
	seq     int64
}

// pingPayload is the payload as the ping message's string field carries it.
// Protobuf strings must be valid UTF-8 (gRPC refuses to marshal anything
// else), and -payload-size's random bytes are not, so this does what Fortio
// does for the same flags: it drops the invalid sequences and pads the
// result with 'X' back to the length asked for, so the request still has
// -payload-size bytes and both tools send the same kind of message.
func pingPayload(b []byte) string {
	s := strings.ToValidUTF8(string(b), "")
	if pad := len(b) - len(s); pad > 0 {
		s += strings.Repeat("X", pad)
	}
	return s
}

func (c *pingCaller) Call(ctx context.Context) loadgen.Outcome {
	ctx, cancel := withTimeout(withMetadata(ctx, c.md), c.opts.Timeout)
	defer cancel()
	c.seq++
	msg := &pingpb.PingMessage{
		Seq: c.seq, Ts: time.Now().UnixNano(), Payload: c.payload,
		DelayNanos: c.opts.PingDelay.Nanoseconds(),
	}
	resp, err := c.client.Ping(ctx, msg)
	if err == nil && (resp.GetSeq() != msg.Seq || resp.GetPayload() != msg.Payload) {
		err = errors.New("the ping reply does not match the request")
	}
	if err != nil {
		return loadgen.Outcome{Code: errorCode, Err: err}
	}
	return loadgen.Outcome{Code: int(healthpb.HealthCheckResponse_SERVING), OK: true}
}
