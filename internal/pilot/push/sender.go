package push

import (
	"context"
	"sync"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// RunPushes hands queued pushes to push, at most limit at a time
// (PILOT_PUSH_THROTTLE; pass Options.EffectiveThrottle()). Generating and
// sending config for thousands of proxies at once would spike CPU and memory
// and slow every one of them; the bound keeps each push fast.
//
// Like istiod, it takes a slot before dequeueing, so a connection stays in
// the queue, where later requests merge into it, until a slot is free; its
// queue time therefore includes waiting for the throttle. Each push runs in
// its own goroutine; when it returns, the slot is freed and the connection
// marked done, which queues its follow-up if any. push records
// pilot_proxy_convergence_time itself (Metrics.ObserveConvergence) because only
// it knows whether the proxy needed the push at all.
//
// RunPushes returns when ctx ends or the queue is shut down and drained, once
// every push it started has returned. push should give up when ctx ends.
func RunPushes[C comparable](ctx context.Context, q *Queue[C], limit int, push func(ctx context.Context, conn C, req *model.PushRequest)) {
	limit = max(limit, 1)
	slots := make(chan struct{}, limit)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		conn, req, err := q.Dequeue(ctx)
		if err != nil {
			return
		}
		running.Add(1)
		go func() {
			defer running.Done()
			defer func() {
				q.MarkDone(conn)
				<-slots
			}()
			push(ctx, conn, req)
		}()
	}
}
