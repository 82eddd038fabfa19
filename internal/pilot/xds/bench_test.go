package xds

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// sharedGen hands every proxy the same encoded resources, as a generator that
// builds one Sidecar scope's config for many proxies does.
type sharedGen struct{ res Resources }

func (g sharedGen) Generate(*model.Proxy, string, []string, *model.PushRequest) (Resources, error) {
	return g.res, nil
}

func benchClusters(b *testing.B, n int) Resources {
	res := make(Resources, 0, n)
	for i := range n {
		name := fmt.Sprintf("outbound|8080||svc-%d.ns-%d.svc.cluster.local", i, i%10)
		body, err := anypb.New(&cluster.Cluster{
			Name:                 name,
			ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
			EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: &core.ConfigSource{
				ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}},
			ConnectTimeout: durationpb.New(10e9),
			LbPolicy:       cluster.Cluster_LEAST_REQUEST,
		})
		if err != nil {
			b.Fatal(err)
		}
		res = append(res, Resource{Name: name, Body: body})
	}
	return res
}

// BenchmarkPush50ClustersTo100Connections is one full push of 50 clusters to
// 100 connected proxies, concurrently, as the pipeline's throttle would allow.
func BenchmarkPush50ClustersTo100Connections(b *testing.B) {
	benchPush(newTestEnv(b, sharedGen{res: benchClusters(b, 50)}, Options{}), b, 100)
}

// BenchmarkPush500x4kBTo100Connections pushes 500 resources of 4 kB (2 MB) to
// 100 proxies, with gRPC's proto codec (a copy of the 2 MB per send) and with
// the server's shared-bytes codec. The clients discard what they receive, so
// B/op is the server's.
func BenchmarkPush500x4kBTo100Connections(b *testing.B) {
	bodies := testBodies(b, 500, 4000)
	res := make(Resources, len(bodies))
	for i, body := range bodies {
		res[i] = Resource{Name: fmt.Sprint("c", i), Body: body}
	}
	discard := grpc.WithDefaultCallOptions(grpc.ForceCodecV2(discardResponses{}))
	for _, shared := range []bool{false, true} {
		name := "codec=proto"
		if shared {
			name = "codec=shared"
		}
		b.Run(name, func(b *testing.B) {
			benchPush(newTestEnvCodec(b, sharedGen{res: res}, Options{}, shared, discard), b, 100)
		})
	}
}

// benchPush connects proxies to e, each watching clusters, and measures full
// pushes to all of them at once.
func benchPush(e *testEnv, b *testing.B, proxies int) {
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	b.Cleanup(func() { cancel(); readers.Wait() })
	conns := make([]*Connection, 0, proxies)
	for range proxies {
		c := e.sotw(b, ctx, testNode(b, "1.22.0"))
		c.ask(ClusterType)
		c.recv()
		conns = append(conns, nextConn(b, e.hooks.connected))
		readers.Go(func() {
			for {
				if _, err := c.stream.Recv(); err != nil {
					return
				}
			}
		})
	}
	req := model.NewPushRequest(model.ReasonConfig, true, time.Now())
	b.ReportAllocs()
	for b.Loop() {
		var wg sync.WaitGroup
		for _, conn := range conns {
			wg.Go(func() {
				if err := e.srv.Push(ctx, conn, req); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*proxies), "ns/proxy")
}

// discardResponses is a client codec that encodes requests as protobuf and
// drops responses unread, so that a benchmark's allocations are the server's.
type discardResponses struct{}

func (discardResponses) Name() string { return "proto" }

func (discardResponses) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (discardResponses) Unmarshal(mem.BufferSlice, any) error { return nil }

// BenchmarkResourceCacheEntry looks up the entries of a large snapshot's
// Bodies, as every send does for each resource it carries.
func BenchmarkResourceCacheEntry(b *testing.B) {
	bodies := make([]*anypb.Any, 200_000)
	for i := range bodies {
		bodies[i] = &anypb.Any{TypeUrl: ClusterType, Value: []byte{byte(i)}}
	}
	c := &resourceCache{}
	for _, body := range bodies {
		c.entry(body)
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		c.entry(bodies[i%len(bodies)])
		i += 7919 // a prime stride, so lookups do not walk memory in order
	}
}
