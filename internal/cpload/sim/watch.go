package sim

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"time"
)

// Watch records, per proxy, when a resource name first arrived: the name of a
// resource in any response (a cluster such as outbound|80||svc.ns.svc.cluster.local,
// a listener, a route configuration, an endpoint assignment, a secret), or of
// a virtual host inside a route configuration (HOST:PORT). Register it before
// applying the change it waits for; the proxies check each response's names
// against the registered watches as they decode them, which costs one map
// lookup per name.
type Watch struct {
	name   string
	since  time.Time
	first  []atomic.Int64 // unix nanos of the first arrival; 0 until then
	count  atomic.Int64
	fleet  *Fleet
	notify chan struct{} // receives (without blocking) on every new arrival
}

// Watch starts recording the first arrival of name on every proxy.
func (f *Fleet) Watch(name string) *Watch {
	w := &Watch{name: name, since: time.Now(), first: make([]atomic.Int64, len(f.proxies)), fleet: f,
		notify: make(chan struct{}, 1)}
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	next := map[string]*Watch{}
	if cur := f.watches.Load(); cur != nil {
		next = maps.Clone(*cur)
	}
	next[name] = w
	f.watches.Store(&next)
	return w
}

// Unwatch stops recording w; its arrivals so far stay readable.
func (f *Fleet) Unwatch(w *Watch) {
	f.watchMu.Lock()
	defer f.watchMu.Unlock()
	cur := f.watches.Load()
	if cur == nil || (*cur)[w.name] != w {
		return
	}
	next := maps.Clone(*cur)
	delete(next, w.name)
	f.watches.Store(&next)
}

func (w *Watch) arrived(i int, at time.Time) {
	if w.first[i].CompareAndSwap(0, at.UnixNano()) {
		w.count.Add(1)
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
}

// Name is the watched name.
func (w *Watch) Name() string { return w.name }

// Since is when the watch was registered.
func (w *Watch) Since() time.Time { return w.since }

// Arrival is when the name first reached proxy i.
func (w *Watch) Arrival(i int) (time.Time, bool) {
	n := w.first[i].Load()
	if n == 0 {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}

// Count is how many proxies have received the name.
func (w *Watch) Count() int { return int(w.count.Load()) }

// Wait returns once every proxy in which (all proxies if nil) has received the
// name, or with ctx's error saying how many had.
func (w *Watch) Wait(ctx context.Context, which []int) error {
	for {
		missing := 0
		if which == nil {
			missing = len(w.first) - w.Count()
		} else {
			for _, i := range which {
				if w.first[i].Load() == 0 {
					missing++
				}
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-w.notify:
		case <-ctx.Done():
			return fmt.Errorf("%q reached %d proxies; %d of those waited for still lack it: %w",
				w.name, w.Count(), missing, ctx.Err())
		}
	}
}
