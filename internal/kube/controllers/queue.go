// Package controllers holds what the pilot's Kubernetes controllers share:
// the work queue each runs its reconcile from, as istiod's controllers
// share theirs (pkg/kube/controllers).
package controllers

import (
	"context"

	"k8s.io/client-go/util/workqueue"
)

// Queue hands keys to reconcile one at a time: a key added again while it
// is waiting is handled once, and a key whose reconcile fails is handed
// again with client-go's controller backoff, without holding up the
// others.
type Queue struct {
	queue     workqueue.TypedRateLimitingInterface[string]
	reconcile func(ctx context.Context, key string) error
	retrying  func(key string, err error)
}

// NewQueue makes a queue that reconciles each key with reconcile, and
// calls retrying (to log it) before it hands a failed key again. The
// caller shuts it down (ShutDown) if it does not Run it.
func NewQueue(reconcile func(ctx context.Context, key string) error, retrying func(key string, err error)) *Queue {
	return &Queue{
		queue:     workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		reconcile: reconcile,
		retrying:  retrying,
	}
}

// Add queues key (an informer's event handler calls it).
func (q *Queue) Add(key string) { q.queue.Add(key) }

// ShutDown stops the queue: Run returns once the reconcile under way ends.
func (q *Queue) ShutDown() { q.queue.ShutDown() }

// Run reconciles keys until ctx ends (or ShutDown), then returns. A
// reconcile that fails because ctx ended is not retried.
func (q *Queue) Run(ctx context.Context) {
	defer q.queue.ShutDown()
	go func() {
		<-ctx.Done()
		q.queue.ShutDown()
	}()
	for {
		key, quit := q.queue.Get()
		if quit {
			return
		}
		err := q.reconcile(ctx, key)
		switch {
		case err == nil:
			q.queue.Forget(key)
		case ctx.Err() == nil:
			q.retrying(key, err)
			q.queue.AddRateLimited(key)
		}
		q.queue.Done(key)
	}
}
