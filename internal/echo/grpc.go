package echo

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/meshperf/meshperf/pkg/pingpb"
)

type grpcEcho struct {
	ln  net.Listener
	srv *grpc.Server
}

// serveGRPC serves the standard health service and Fortio's ping service,
// plus reflection so that grpcurl and Fortio's -grpc-method can discover
// them, as Fortio's server does.
func (s *Server) serveGRPC(ln net.Listener) *grpcEcho {
	var opts []grpc.ServerOption
	if s.cfg.GRPCMaxStreams > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(s.cfg.GRPCMaxStreams))
	}
	gs := grpc.NewServer(opts...)
	reflection.Register(gs)
	// health.NewServer reports "" as SERVING already; the named service and
	// its "_down" twin mirror Fortio, whose tests expect both answers.
	hs := health.NewServer()
	hs.SetServingStatus(s.cfg.HealthService, healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus(s.cfg.HealthService+"_down", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	pingpb.RegisterPingServerServer(gs, &pingService{maxDelay: s.cfg.MaxDelay})
	go func() {
		// Serve returns nil after Stop; any other error is a listener failure.
		if err := gs.Serve(ln); err != nil {
			s.log.Error("gRPC server stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
	return &grpcEcho{ln: ln, srv: gs}
}

func (g *grpcEcho) close() { g.srv.Stop() }

// pingService answers Ping like Fortio's server: same seq, payload and
// delayNanos, ts set to when the request arrived, reply sent after the
// requested delay. Unlike Fortio, the delay is capped at MaxDelay, as the
// HTTP delay= parameter is.
type pingService struct {
	pingpb.UnimplementedPingServerServer
	maxDelay time.Duration
}

func (p *pingService) Ping(ctx context.Context, in *pingpb.PingMessage) (*pingpb.PingMessage, error) {
	out := &pingpb.PingMessage{
		Seq:        in.GetSeq(),
		Ts:         time.Now().UnixNano(),
		Payload:    in.GetPayload(),
		DelayNanos: in.GetDelayNanos(),
	}
	if d := min(time.Duration(in.GetDelayNanos()), p.maxDelay); d > 0 {
		if !sleep(ctx, d) {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	return out, nil
}
