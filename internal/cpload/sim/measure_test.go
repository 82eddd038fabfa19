package sim

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/push"
)

// TestMeasureConnectionCost measures what one gRPC connection per proxy costs
// the load process against sharing connections, with the control plane in the
// same process (so both ends of each connection are counted). It is a
// measurement, run only when asked:
//
//	MESHPERF_SIM_PROXIES=1000 go test ./internal/cpload/sim -run TestMeasureConnectionCost -v
func TestMeasureConnectionCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("MESHPERF_SIM_PROXIES"))
	if n <= 0 {
		t.Skip("set MESHPERF_SIM_PROXIES to measure")
	}
	for _, perConn := range []int{1, 10, 100} {
		t.Run(strconv.Itoa(perConn), func(t *testing.T) { measureFleet(t, n, perConn) })
	}
}

func measureFleet(t *testing.T, n, perConn int) {
	{
		// Without a raised new-stream limit the control plane admits about
		// 25 streams a second on two cores, which is what would be measured.
		_, addr := startPilotWith(t, func(o *push.Options) { o.MaxRequestsPerSecond = 1e6; o.MaxRequestsBurst = 1e6 })
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		f, err := NewFleet(specs(n), Options{Target: addr, ProxiesPerConn: perConn, ConnectRate: -1})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		if err := f.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := f.WaitSynced(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		r := f.Report()
		t.Logf("%d proxies, %d per connection: all synced in %v (first config p50 %v p99 %v); heap +%.1f MB, goroutines %d",
			n, perConn, r.AllSynced.Round(time.Millisecond), r.FirstConfig.P50.Round(time.Millisecond),
			r.FirstConfig.P99.Round(time.Millisecond), (float64(after.HeapInuse)-float64(before.HeapInuse))/1e6, runtime.NumGoroutine())
		f.Stop()
		cancel()
	}
}
