package push

import (
	"context"
	"errors"
	"sync"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// ErrQueueShutDown is returned by Dequeue once the queue is shut down and
// drained.
var ErrQueueShutDown = errors.New("push queue shut down")

// Queue holds the pushes waiting for each proxy connection, keyed by C (the xDS
// server's connection type, or any comparable id). Each connection has at most
// one push in flight and one merged push waiting: a slow proxy then costs one
// merged push when it catches up, not a backlog of stale ones, and one proxy
// never gets two pushes at once. Connections are served first come, first
// served, by when their waiting push was first queued.
type Queue[C comparable] struct {
	clock Clock
	m     *Metrics

	mu       sync.Mutex
	order    []queued[C] // FIFO of waiting connections; order[head:] is live
	head     int
	seq      uint64
	pending  map[C]pendingPush
	inflight map[C]followUp
	shutdown bool

	notify chan struct{} // wakes one Dequeue; capacity 1
	closed chan struct{} // closed by ShutDown
}

// queued is a place in line. seq tells a live place from one left behind by
// Remove (the connection's pending push is gone or was queued again later).
type queued[C comparable] struct {
	conn C
	seq  uint64
}

type pendingPush struct {
	merged mergedRequest
	seq    uint64
}

// followUp is what arrived for a connection while its push was in flight.
type followUp struct {
	merged  mergedRequest
	removed bool // the connection went away: drop it on MarkDone
}

// NewQueue returns an empty queue that reads time from clock and records
// pilot_proxy_queue_time and pilot_push_triggers into m (may be nil).
func NewQueue[C comparable](clock Clock, m *Metrics) *Queue[C] {
	return &Queue[C]{
		clock:    clock,
		m:        m,
		pending:  make(map[C]pendingPush),
		inflight: make(map[C]followUp),
		notify:   make(chan struct{}, 1),
		closed:   make(chan struct{}),
	}
}

// Enqueue asks for req to be pushed to conn. If conn already has a push
// waiting, req is merged into it; if its push is in flight, req is merged into
// a follow-up queued again when MarkDone is called. req is shared, never
// modified, and must not be modified by the caller afterwards. After ShutDown,
// Enqueue does nothing.
func (q *Queue[C]) Enqueue(conn C, req *model.PushRequest) {
	if req == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.enqueueLocked(conn, req, nil)
}

// StartPush stamps a copy of req with the current time as its start (the
// start of pilot_proxy_queue_time and pilot_proxy_convergence_time, as in
// istiod, which excludes the debounce wait) and enqueues it for every conn,
// under one lock. The caller's push function calls it once per debounced push
// with the connected proxies.
func (q *Queue[C]) StartPush(req *model.PushRequest, conns []C) {
	if req == nil {
		return
	}
	stamped := *req // the maps stay shared; nothing here modifies them
	stamped.Start = q.clock.Now()
	// Connections still waiting for an earlier push mostly hold the same
	// shared request (a connect storm's, say, naming thousands of
	// configs); their union with req is made once per shared request, not
	// copied once per connection.
	unions := make(map[*model.PushRequest]*model.PushRequest)
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range conns {
		q.enqueueLocked(c, &stamped, unions)
	}
}

// enqueueLocked merges req into conn's waiting or follow-up push, through
// unions (shared request -> its union with req) when it is not nil.
func (q *Queue[C]) enqueueLocked(conn C, req *model.PushRequest, unions map[*model.PushRequest]*model.PushRequest) {
	if q.shutdown {
		return
	}
	if f, ok := q.inflight[conn]; ok {
		if !f.removed {
			f.merged.addShared(req, unions)
			q.inflight[conn] = f
		}
		return
	}
	if p, ok := q.pending[conn]; ok {
		p.merged.addShared(req, unions)
		q.pending[conn] = p
		return
	}
	q.pushBackLocked(conn, mergedRequest{req: req})
}

func (q *Queue[C]) pushBackLocked(conn C, m mergedRequest) {
	q.seq++
	q.pending[conn] = pendingPush{merged: m, seq: q.seq}
	q.order = append(q.order, queued[C]{conn: conn, seq: q.seq})
	q.wake()
}

func (q *Queue[C]) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Dequeue blocks until a connection has a push waiting, marks it in flight
// and returns it with its merged request. It records how long the request
// waited (pilot_proxy_queue_time) and adds each merged reason's count to
// pilot_push_triggers. It returns ctx's error if ctx ends first, and
// ErrQueueShutDown once the queue is shut down and empty.
func (q *Queue[C]) Dequeue(ctx context.Context) (C, *model.PushRequest, error) {
	for {
		q.mu.Lock()
		conn, req, ok := q.popLocked()
		more := q.head < len(q.order)
		shutdown := q.shutdown
		q.mu.Unlock()
		if ok {
			if more {
				q.wake() // the single token may have been meant for several waiters
			}
			q.m.observeDequeue(req, q.clock.Now())
			return conn, req, nil
		}
		var zero C
		if shutdown {
			return zero, nil, ErrQueueShutDown
		}
		select {
		case <-ctx.Done():
			return zero, nil, ctx.Err()
		case <-q.notify:
		case <-q.closed:
		}
	}
}

// popLocked takes the first live place in line, skipping places that Remove
// left behind.
func (q *Queue[C]) popLocked() (C, *model.PushRequest, bool) {
	for q.head < len(q.order) {
		it := q.order[q.head]
		q.order[q.head] = queued[C]{} // let a closed connection be collected
		q.head++
		p, ok := q.pending[it.conn]
		if !ok || p.seq != it.seq {
			continue
		}
		delete(q.pending, it.conn)
		q.inflight[it.conn] = followUp{}
		q.compactLocked()
		return it.conn, p.merged.req, true
	}
	q.compactLocked()
	var zero C
	return zero, nil, false
}

// compactLocked reuses the line's backing array once its consumed front
// outweighs the rest, so a long-running queue does not grow without bound.
func (q *Queue[C]) compactLocked() {
	switch {
	case q.head == len(q.order):
		q.order, q.head = q.order[:0], 0
	case q.head > 1024 && q.head > len(q.order)/2:
		n := copy(q.order, q.order[q.head:])
		clear(q.order[n:])
		q.order, q.head = q.order[:n], 0
	}
}

// MarkDone ends conn's in-flight push. If requests arrived meanwhile, their
// merge goes to the back of the line.
func (q *Queue[C]) MarkDone(conn C) {
	q.mu.Lock()
	defer q.mu.Unlock()
	f, ok := q.inflight[conn]
	if !ok {
		return
	}
	delete(q.inflight, conn)
	if !f.removed && f.merged.req != nil {
		q.pushBackLocked(conn, f.merged)
	}
}

// Remove forgets conn, for a proxy that disconnected: its waiting push and
// any follow-up are dropped, and an in-flight push is not followed up. Call it
// after conn is no longer among the connections given to StartPush, or a late
// StartPush may queue it again.
func (q *Queue[C]) Remove(conn C) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.pending, conn) // its place in line is now stale and skipped
	if _, ok := q.inflight[conn]; ok {
		q.inflight[conn] = followUp{removed: true}
	}
}

// Pending is the number of connections with a push waiting (not in flight).
func (q *Queue[C]) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pending)
}

// ShutDown stops the queue taking new requests. Dequeue keeps returning what
// is already waiting, then ErrQueueShutDown, so senders drain and exit.
func (q *Queue[C]) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.shutdown {
		q.shutdown = true
		close(q.closed)
	}
}
