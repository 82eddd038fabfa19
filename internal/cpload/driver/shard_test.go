package driver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/proc"
)

// TestShardsMakeOneFleet splits a fleet over two shards against one
// meshperf pilot started on its own: shard 1 loads the mesh and renames a
// ServiceEntry four times, shard 2 only connects. Each shard simulates
// its half; merged, the report counts every proxy once, times every
// change's delivery to every proxy from shard 1's apply, and misses none.
func TestShardsMakeOneFleet(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p, err := proc.StartPilot(ctx, proc.PilotOptions{Command: pilotCommand(t), DataDir: t.TempDir(), LogLevel: "warn"}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop() }()
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 2, ServicesPerNamespace: 2, Replicas: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	fleet := len(m.Proxies)
	const changes = 4
	shards := make([]*driver.Report, 2)
	progress := make([]bytes.Buffer, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := driver.Config{Name: "sharded", Shape: "uniform", Mesh: m, Shard: driver.Shard{Index: i + 1, Count: 2},
				Churn: driver.ChurnConfig, Namespace: "ns-0", Rate: changes, Duration: time.Second,
				Target: p.Addrs.GRPC, ApplyWith: "meshperf-api", APIURL: p.APIURL(), MetricsURL: p.MetricsURL(),
				ConnectRate: -1, Timeout: 20 * time.Second, Progress: &progress[i]}
			r, err := driver.Run(ctx, c)
			if err != nil {
				errs[i] = err
				return
			}
			// Merge reads the reports as cpload run --json writes them.
			b, err := json.Marshal(r)
			if err == nil {
				shards[i] = &driver.Report{}
				err = json.Unmarshal(b, shards[i])
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("shard %d/2: %v\n%s", i+1, err, progress[i].String())
		}
	}
	if shards[0].Proxies+shards[1].Proxies != fleet || shards[0].Proxies == 0 || shards[1].Proxies == 0 {
		t.Fatalf("shards of %d and %d proxies, want %d between them", shards[0].Proxies, shards[1].Proxies, fleet)
	}
	if shards[1].Churn != nil {
		t.Errorf("shard 2 reports churn of its own: %+v", shards[1].Churn)
	}
	for i, r := range shards {
		if got := len(r.Shard.Changes); got != changes {
			t.Fatalf("shard %d/2 recorded %d changes, want %d", i+1, got, changes)
		}
	}
	merged, err := driver.Merge([]driver.ShardReport{{Source: "two.json", Report: shards[1]}, {Source: "one.json", Report: shards[0]}})
	if err != nil {
		t.Fatal(err)
	}
	if merged.Proxies != fleet || merged.Connect.FirstConfig.N != fleet || merged.Connect.AllSynced <= 0 {
		t.Errorf("merged: %d proxies, %d first configs, all synced %v ms; want %d, %d, > 0", merged.Proxies, merged.Connect.FirstConfig.N, merged.Connect.AllSynced, fleet, fleet)
	}
	// With no Sidecar scoping every sidecar imports ns-0: each change is
	// delivered once to each proxy, whichever shard simulates it.
	for j := range changes {
		got := len(shards[0].Shard.Changes[j].Arrivals) + len(shards[1].Shard.Changes[j].Arrivals)
		want := shards[0].Shard.Changes[j].Expected + shards[1].Shard.Changes[j].Expected
		if want != fleet || got != want {
			t.Errorf("change %d: %d deliveries of %d expected, want %d", j+1, got, want, fleet)
		}
	}
	ch := merged.Churn
	if ch == nil || ch.Changes != changes || ch.Expected != changes*fleet || ch.EndToEnd.N != changes*fleet || ch.Missed != 0 || ch.PerChange.N != changes {
		t.Errorf("merged churn %+v: want %d changes, %d deliveries, none missed", ch, changes, changes*fleet)
	}
	if merged.ControlPlane == nil || merged.ControlPlane.Pushes == 0 {
		t.Errorf("merged control plane figures (shard 1's): %+v", merged.ControlPlane)
	}
	// The control plane holds the whole fleet: its memory is shared out
	// over every shard's proxies.
	if pr := merged.Process; pr == nil || math.Abs(pr.KBPerProxyAtSync*float64(fleet)-pr.RSSAtSyncMB*1024) > 1 {
		t.Errorf("merged control plane memory %+v: want its RSS at sync over %d proxies", pr, fleet)
	}
	if len(merged.Shards) != 2 || merged.Simulator == nil || merged.Simulator.CPUSeconds != merged.Shards[0].Simulator.CPUSeconds+merged.Shards[1].Simulator.CPUSeconds {
		t.Errorf("merged simulator %+v, shards %+v: want the shards' sum", merged.Simulator, merged.Shards)
	}
	var out bytes.Buffer
	merged.Print(&out)
	for _, want := range []string{"8 simulated proxies", "0 missed", "shard 1/2: 4 proxies", "shard 2/2: 4 proxies", "merged from 2 shards"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("merged report lacks %q:\n%s", want, out.String())
		}
	}
	// The readiness marker shard 1 added is gone with the churn's leftovers:
	// a proxy connecting once the deletion is pushed does not get its
	// cluster.
	for attempt := 0; ; attempt++ {
		if !hasCluster(ctx, t, p.Addrs.GRPC, m.Proxies[0], "outbound|80||cpload-shards-ready.ns-0.cpload.example") {
			break
		}
		if attempt == 50 {
			t.Fatal("the shards' readiness marker outlived the run")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasCluster says whether a proxy connecting now as spec gets cluster in
// its first config.
func hasCluster(ctx context.Context, t *testing.T, target string, spec sim.ProxySpec, cluster string) bool {
	t.Helper()
	probe, err := sim.NewFleet([]sim.ProxySpec{spec}, sim.Options{Target: target, ConnectRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	w := probe.Watch(cluster)
	if err := probe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer probe.Stop()
	if err := probe.WaitSynced(ctx); err != nil {
		t.Fatal(err)
	}
	_, ok := w.Arrival(0)
	return ok
}
