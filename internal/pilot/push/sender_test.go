package push

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

func TestRunPushesNeverExceedsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const conns, limit = 50, 7
		clk := newFakeClock()
		q := NewQueue[int](clk, nil)
		var (
			running, most atomic.Int32
			mu            sync.Mutex
			pushed        = map[int]int{}
			gate          = make(chan struct{})
		)
		push := func(_ context.Context, conn int, _ *model.PushRequest) {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			<-gate
			mu.Lock()
			pushed[conn]++
			mu.Unlock()
			running.Add(-1)
		}
		ids := make([]int, conns)
		for i := range ids {
			ids[i] = i
		}
		q.StartPush(model.NewPushRequest(model.ReasonConfig, true, clk.Now()), ids)
		done := make(chan struct{})
		go func() {
			RunPushes(context.Background(), q, limit, push)
			close(done)
		}()
		synctest.Wait()
		if running.Load() != limit {
			t.Fatalf("%d pushes running with a limit of %d and %d queued", running.Load(), limit, conns)
		}
		if q.Pending() != conns-limit {
			t.Errorf("Pending() = %d, want %d still queued", q.Pending(), conns-limit)
		}
		// Release pushes one at a time; every release lets exactly one more in.
		for range conns {
			gate <- struct{}{}
			synctest.Wait()
			if n := running.Load(); n > limit {
				t.Fatalf("%d pushes running, limit %d", n, limit)
			}
		}
		q.ShutDown()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("RunPushes did not return after the queue drained and shut down")
		}
		if most.Load() != limit {
			t.Errorf("at most %d pushes ran at once, want exactly the limit %d", most.Load(), limit)
		}
		if len(pushed) != conns {
			t.Errorf("%d of %d connections pushed", len(pushed), conns)
		}
		for c, n := range pushed {
			if n != 1 {
				t.Errorf("connection %d pushed %d times", c, n)
			}
		}
	})
}

func TestRunPushesRequeuesFollowUpAfterPush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		q := NewQueue[string](clk, nil)
		got := make(chan *model.PushRequest, 2)
		release := make(chan struct{})
		push := func(_ context.Context, _ string, req *model.PushRequest) {
			got <- req
			<-release
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			RunPushes(ctx, q, 4, push)
			close(done)
		}()
		q.Enqueue("a", model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
		synctest.Wait()
		// While a's push runs, two more requests arrive: one follow-up, and
		// no second push to a at the same time despite free slots.
		q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now()))
		q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now()))
		synctest.Wait()
		if len(got) != 1 {
			t.Fatalf("%d pushes to a started, want 1 in flight", len(got))
		}
		<-got
		release <- struct{}{}
		synctest.Wait()
		if len(got) != 1 {
			t.Fatal("the follow-up was not pushed after the first push returned")
		}
		if r := <-got; r.Reason[model.ReasonEndpoint] != 2 || r.Full {
			t.Errorf("follow-up %+v, want the two endpoint requests merged", r)
		}
		release <- struct{}{}
		cancel()
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("RunPushes did not return on cancel")
		}
	})
}
