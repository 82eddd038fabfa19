package sim

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/push"
)

// BenchmarkFleetConnections measures what one gRPC connection per proxy
// costs the load process against sharing connections: each iteration
// connects a fleet of 500 simulated proxies to an in-process control plane
// (both ends of each connection are counted), waits until every proxy has
// its full first config, and stops it. heap-KB/proxy is the live heap held
// while the fleet is up; mem-KB/proxy adds the goroutine stacks, which the
// heap figure misses and the process's RSS includes; goroutines/proxy counts
// the goroutines the fleet keeps running. All three include the control
// plane's side of each stream, since it runs in the same process.
//
//	go test ./internal/cpload/sim -run '^$' -bench FleetConnections -benchtime 3x
func BenchmarkFleetConnections(b *testing.B) {
	const proxies = 500
	for _, perConn := range []int{1, 10, 100} {
		b.Run("per-conn="+strconv.Itoa(perConn), func(b *testing.B) {
			// Without a raised new-stream limit the control plane admits
			// about 25 streams a second on two cores, which is what would be
			// measured.
			_, addr := startPilotWith(b, func(o *push.Options) { o.MaxRequestsPerSecond = 1e6; o.MaxRequestsBurst = 1e6 })
			var sum fleetCost
			for b.Loop() {
				c := syncFleet(b, addr, proxies, perConn)
				sum.heap += c.heap
				sum.stack += c.stack
				sum.goroutines += c.goroutines
			}
			perProxy := float64(b.N) * proxies
			b.ReportMetric(sum.heap/perProxy/1024, "heap-KB/proxy")
			b.ReportMetric((sum.heap+sum.stack)/perProxy/1024, "mem-KB/proxy")
			b.ReportMetric(sum.goroutines/perProxy, "goroutines/proxy")
		})
	}
}

// fleetCost is what a synced fleet adds to the process: live heap and
// goroutine stacks in bytes, and goroutines.
type fleetCost struct{ heap, stack, goroutines float64 }

// syncFleet brings a fleet up to its first full config and returns what it
// added to the process.
func syncFleet(b *testing.B, addr string, n, perConn int) fleetCost {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	goroutinesBefore := runtime.NumGoroutine()
	f, err := NewFleet(specs(n), Options{Target: addr, ProxiesPerConn: perConn, ConnectRate: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f.Start(ctx); err != nil {
		b.Fatal(err)
	}
	if err := f.WaitSynced(ctx); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return fleetCost{
		heap:       float64(after.HeapInuse) - float64(before.HeapInuse),
		stack:      float64(after.StackInuse) - float64(before.StackInuse),
		goroutines: float64(runtime.NumGoroutine() - goroutinesBefore),
	}
}
