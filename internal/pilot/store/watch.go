package store

import (
	"sync"
	"sync/atomic"
)

// watcher delivers one Watch's events from its own goroutine. Writers only
// append to its queue, never wait for it, so a slow fn cannot stall a write;
// the queue is bounded by limit, and a watcher that exceeds it is switched to
// a single Resync event (see the Resync doc for why).
type watcher struct {
	fn      func(Event)
	limit   int
	wake    chan struct{} // capacity 1: "the queue or the flags changed"
	stopped atomic.Bool

	mu         sync.Mutex
	queue      []Event
	overflowed int64 // the revision at overflow; 0 = not overflowed
}

func newWatcher(fn func(Event), limit int) *watcher {
	return &watcher{fn: fn, limit: limit, wake: make(chan struct{}, 1)}
}

// enqueue adds one write's events. It runs under the state's lock and must not
// block.
func (w *watcher) enqueue(events []Event, rev int64) {
	w.mu.Lock()
	switch {
	case w.overflowed != 0:
		// Already told to resync; later events are moot.
	case len(w.queue)+len(events) > w.limit:
		w.overflowed = rev
		w.queue = nil
	default:
		w.queue = append(w.queue, events...)
	}
	w.mu.Unlock()
	w.signal()
}

func (w *watcher) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// stop ends delivery: fn is not called again once a call that is already
// running returns. It does not wait for that call, so it is safe from inside fn.
func (w *watcher) stop() {
	w.stopped.Store(true)
	w.signal()
}

// run is the watcher's goroutine. remove unregisters it from the state when it
// ends by itself (after a Resync).
func (w *watcher) run(remove func(*watcher)) {
	for range w.wake {
		if w.stopped.Load() {
			return
		}
		w.mu.Lock()
		batch, overflowed := w.queue, w.overflowed
		w.queue = nil
		w.mu.Unlock()
		for _, ev := range batch {
			if w.stopped.Load() {
				return
			}
			w.fn(ev)
		}
		if overflowed != 0 {
			w.stopped.Store(true)
			remove(w)
			w.fn(Event{Type: Resync, Revision: overflowed})
			return
		}
	}
}

// ListWatch runs list at a moment consistent with a new watch: fn then gets
// exactly the changes made after what list saw, none missed, none repeated.
// It returns the revision list saw and the watch's cancel.
//
// Reader has no atomic list-and-watch, so this is optimistic: it reads the
// revision, lists, starts the watch, and accepts when the watch starts at the
// revision read before listing (no write came in between); otherwise it
// drops that watch and tries again. list may therefore run more than once
// and must replace, not add to, what it collected. Writes are milliseconds
// apart (each is an fsync), so a retry is rare and a second one rarer.
func ListWatch(r Reader, list func(), fn func(Event)) (revision int64, cancel func()) {
	for {
		before := r.Revision()
		list()
		gate := make(chan struct{})
		var accepted atomic.Bool
		start, cancel := r.Watch(func(ev Event) {
			<-gate // hold events until we know whether this watch is kept
			if accepted.Load() {
				fn(ev)
			}
		})
		if start == before {
			accepted.Store(true)
			close(gate)
			return start, cancel
		}
		cancel()
		close(gate)
	}
}
