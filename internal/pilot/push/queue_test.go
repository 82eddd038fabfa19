package push

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
)

func key(name string) config.Key {
	return config.Key{Kind: config.KindServiceEntry, Namespace: "ns", Name: name}
}

// dequeueNow dequeues without waiting: the test knows something is there.
func dequeueNow[C comparable](t *testing.T, q *Queue[C]) (C, *model.PushRequest) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, r, err := q.Dequeue(ctx)
	if err != nil {
		t.Fatalf("Dequeue: %v (pending %d)", err, q.Pending())
	}
	return c, r
}

func expectEmpty[C comparable](t *testing.T, q *Queue[C]) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if c, r, err := q.Dequeue(ctx); err == nil {
		t.Fatalf("dequeued %v %+v from a queue that should be empty", c, r)
	}
}

func TestQueueFIFOByFirstEnqueue(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[string](clk, nil)
	for _, c := range []string{"a", "b", "c"} {
		q.Enqueue(c, model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
	}
	q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now())) // merges, keeps a's place
	if q.Pending() != 3 {
		t.Errorf("Pending() = %d, want 3", q.Pending())
	}
	for _, want := range []string{"a", "b", "c"} {
		if got, _ := dequeueNow(t, q); got != want {
			t.Errorf("dequeued %q, want %q", got, want)
		}
	}
	expectEmpty(t, q)
}

func TestQueueMergesWhilePending(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[string](clk, nil)
	shared := model.NewPushRequest(model.ReasonEndpoint, false, clk.Now(), key("x"))
	q.Enqueue("a", shared)
	q.Enqueue("b", shared)
	q.Enqueue("a", model.NewPushRequest(model.ReasonConfig, true, clk.Now().Add(-time.Second), key("y")))
	q.Enqueue("a", model.NewPushRequest(model.ReasonConfig, false, clk.Now(), key("z")))
	_, got := dequeueNow(t, q)
	if !got.Full || len(got.ConfigsUpdated) != 3 || got.Reason[model.ReasonConfig] != 2 ||
		got.Reason[model.ReasonEndpoint] != 1 || !got.Start.Equal(clk.Now().Add(-time.Second)) {
		t.Errorf("merged %+v", got)
	}
	if _, b := dequeueNow(t, q); b != shared || shared.Full || len(shared.ConfigsUpdated) != 1 {
		t.Errorf("b got %+v; the shared request must be passed through untouched (%+v)", b, shared)
	}
}

func TestQueueFollowUpWhileInFlight(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[string](clk, nil)
	q.Enqueue("a", model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
	q.Enqueue("b", model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
	if c, _ := dequeueNow(t, q); c != "a" {
		t.Fatalf("dequeued %q", c)
	}
	// a is in flight: these merge into one follow-up, not a second push.
	q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now(), key("x")))
	q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now(), key("y")))
	if q.Pending() != 1 {
		t.Errorf("Pending() = %d, want 1 (only b; a's follow-up waits for MarkDone)", q.Pending())
	}
	if c, _ := dequeueNow(t, q); c != "b" {
		t.Fatalf("dequeued %q, want b", c)
	}
	expectEmpty(t, q)
	q.MarkDone("a")
	c, r := dequeueNow(t, q)
	if c != "a" || r.Reason[model.ReasonEndpoint] != 2 || len(r.ConfigsUpdated) != 2 {
		t.Errorf("follow-up %q %+v", c, r)
	}
	q.MarkDone("a")
	q.MarkDone("b")
	q.MarkDone("never-dequeued") // harmless
	expectEmpty(t, q)
}

func TestQueueRemoveDropsWork(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[string](clk, nil)
	req := model.NewPushRequest(model.ReasonConfig, true, clk.Now())
	q.StartPush(req, []string{"a", "b", "c"})
	q.Remove("b")
	if q.Pending() != 2 {
		t.Errorf("Pending() = %d after Remove", q.Pending())
	}
	if c, _ := dequeueNow(t, q); c != "a" {
		t.Fatalf("dequeued %q", c)
	}
	q.Enqueue("a", req) // follow-up for the in-flight a
	q.Remove("a")       // disconnects mid-push
	q.MarkDone("a")
	if c, _ := dequeueNow(t, q); c != "c" {
		t.Errorf("dequeued %q, want c (b and a's follow-up removed)", c)
	}
	expectEmpty(t, q)
	// A removed connection that comes back starts afresh, at the back.
	q.Enqueue("b", req)
	if c, _ := dequeueNow(t, q); c != "b" {
		t.Errorf("dequeued %q, want b", c)
	}
}

func TestQueueShutDownDrainsThenStops(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[int](clk, nil)
	q.Enqueue(1, model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
	q.ShutDown()
	q.ShutDown() // idempotent
	q.Enqueue(2, model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
	if c, _, err := q.Dequeue(context.Background()); err != nil || c != 1 {
		t.Fatalf("Dequeue after ShutDown = %v, %v; want the waiting push", c, err)
	}
	if _, _, err := q.Dequeue(context.Background()); !errors.Is(err, ErrQueueShutDown) {
		t.Fatalf("Dequeue of a drained, shut down queue: %v", err)
	}
}

func TestQueueDequeueBlocksUntilEnqueueOrCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := newFakeClock()
		q := NewQueue[string](clk, nil)
		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			conn string
			err  error
		}
		results := make(chan result, 3)
		for range 3 {
			go func() {
				c, _, err := q.Dequeue(ctx)
				results <- result{c, err}
			}()
		}
		synctest.Wait()
		if len(results) != 0 {
			t.Fatal("Dequeue returned from an empty queue")
		}
		q.Enqueue("a", model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
		q.Enqueue("b", model.NewPushRequest(model.ReasonConfig, true, clk.Now()))
		synctest.Wait()
		if len(results) != 2 {
			t.Fatalf("%d waiters woke for 2 pushes", len(results))
		}
		cancel()
		synctest.Wait()
		got := map[string]bool{}
		for range 3 {
			r := <-results
			got[r.conn] = true
			if r.conn == "" && !errors.Is(r.err, context.Canceled) {
				t.Errorf("cancelled waiter returned %v", r.err)
			}
		}
		if !got["a"] || !got["b"] || !got[""] {
			t.Errorf("results %v", got)
		}
	})
}

func TestQueueMetricsAtDequeue(t *testing.T) {
	clk := newFakeClock()
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	q := NewQueue[string](clk, m)
	q.StartPush(model.NewPushRequest(model.ReasonConfig, true, time.Time{}), []string{"a", "b"})
	q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now()))
	q.Enqueue("a", model.NewPushRequest(model.ReasonEndpoint, false, clk.Now()))
	clk.Advance(2 * time.Second)
	dequeueNow(t, q)
	clk.Advance(time.Second)
	dequeueNow(t, q)
	if got := testutil.ToFloat64(m.pushTriggers.WithLabelValues("endpoint")); got != 2 {
		t.Errorf("pilot_push_triggers{type=endpoint} = %v, want 2", got)
	}
	if got := testutil.ToFloat64(m.pushTriggers.WithLabelValues("config")); got != 2 {
		t.Errorf("pilot_push_triggers{type=config} = %v, want 2 (one per dequeued proxy)", got)
	}
	if n, sum := histogram(t, reg, "pilot_proxy_queue_time"); n != 2 || sum != 5 {
		t.Errorf("pilot_proxy_queue_time: %d samples summing to %vs, want 2 and 2s+3s", n, sum)
	}
}

// BenchmarkQueueCycle is one push to each of 2000 connections: enqueue all,
// then dequeue and mark each done, as the sender does.
func BenchmarkQueueCycle(b *testing.B) {
	const conns = 2000
	q := NewQueue[int](RealClock{}, NewMetrics(nil))
	ids := make([]int, conns)
	for i := range ids {
		ids[i] = i
	}
	req := model.NewPushRequest(model.ReasonConfig, true, time.Now(), key("x"))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		q.StartPush(req, ids)
		for range conns {
			c, _, err := q.Dequeue(ctx)
			if err != nil {
				b.Fatal(err)
			}
			q.MarkDone(c)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*conns), "ns/conn")
}

// BenchmarkQueueMergeWhileInFlight measures the follow-up path: every
// connection is in flight when the next push arrives.
func BenchmarkQueueMergeWhileInFlight(b *testing.B) {
	const conns = 2000
	q := NewQueue[string](RealClock{}, nil)
	ids := make([]string, conns)
	for i := range ids {
		ids[i] = fmt.Sprintf("conn-%d", i)
	}
	req := model.NewPushRequest(model.ReasonEndpoint, false, time.Now(), key("x"))
	ctx := context.Background()
	q.StartPush(req, ids)
	for range conns {
		if _, _, err := q.Dequeue(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		q.StartPush(req, ids) // all in flight: follow-ups
		for _, c := range ids {
			q.MarkDone(c)
		}
		for range conns {
			if _, _, err := q.Dequeue(ctx); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// A push started for many connections still waiting for an earlier shared
// push gives them one shared union, not a copy each, and leaves the earlier
// request as it was.
func TestStartPushSharesTheUnionAcrossWaitingConnections(t *testing.T) {
	clk := newFakeClock()
	q := NewQueue[int](clk, nil)
	conns := []int{1, 2, 3, 4}
	storm := model.NewPushRequest(model.ReasonEndpoint, false, clk.Now(), key("a"), key("b"))
	q.StartPush(storm, conns)
	q.StartPush(model.NewPushRequest(model.ReasonConfig, true, clk.Now(), key("c")), conns)
	var first *model.PushRequest
	for range conns {
		_, got := dequeueNow(t, q)
		if !got.Full || len(got.ConfigsUpdated) != 3 || got.Reason[model.ReasonEndpoint] != 1 || got.Reason[model.ReasonConfig] != 1 {
			t.Errorf("merged %+v", got)
		}
		if first == nil {
			first = got
		} else if got != first {
			t.Error("each connection got its own copy of the same union")
		}
	}
	if storm.Full || len(storm.ConfigsUpdated) != 2 {
		t.Errorf("the earlier request was modified: %+v", storm)
	}
}
