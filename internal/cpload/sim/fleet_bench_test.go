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
// while the fleet is up.
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
			var heap float64
			for b.Loop() {
				heap += syncFleet(b, addr, proxies, perConn)
			}
			b.ReportMetric(heap/float64(b.N)/proxies/1024, "heap-KB/proxy")
		})
	}
}

// syncFleet brings a fleet up to its first full config and returns the heap
// it added, in bytes.
func syncFleet(b *testing.B, addr string, n, perConn int) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
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
	return float64(after.HeapInuse) - float64(before.HeapInuse)
}
