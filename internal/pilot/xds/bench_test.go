package xds

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
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
	const proxies = 100
	e := newTestEnv(b, sharedGen{res: benchClusters(b, 50)}, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	var readers sync.WaitGroup
	b.Cleanup(func() { cancel(); readers.Wait() })
	conns := make([]*Connection, 0, proxies)
	for range proxies {
		c := e.sotw(b, ctx, testNode(b, "1.22.0"))
		c.ask(ClusterType)
		c.expect(ClusterType)
		conns = append(conns, waitFor(b, e.hooks.connected))
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
