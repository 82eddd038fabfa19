package store

import (
	"cmp"
	"slices"
	"sync"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// entry is one stored resource with its canonical bytes, which are what DB
// persists and what change detection compares.
type entry struct {
	res *config.Resource
	raw []byte
}

// change is one resource's transition in a write: old is nil when it was
// added, new is nil when it was deleted.
type change struct {
	key      config.Key
	old, new *entry
}

// state is the in-memory copy of the config that both stores serve reads from,
// and the watchers of it. Writers compute their changes against it while
// holding their own write lock, then commit them here, which publishes the new
// revision and queues the events in one critical section: that is what makes
// Watch's start revision exact.
type state struct {
	watchBuffer int

	mu       sync.RWMutex
	byKind   map[config.Kind]map[config.Key]*entry
	sorted   map[config.Kind][]*config.Resource // List's cache, by kind; dropped on change
	revision int64
	watchers map[*watcher]struct{}
}

func newState(watchBuffer int) *state {
	return &state{
		watchBuffer: watchBuffer,
		byKind:      make(map[config.Kind]map[config.Key]*entry),
		sorted:      make(map[config.Kind][]*config.Resource),
		watchers:    make(map[*watcher]struct{}),
	}
}

// Get returns the resource with the key, if there is one.
func (s *state) Get(key config.Key) (*config.Resource, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok := s.byKind[key.Kind][key]
	if !ok {
		return nil, false
	}
	return e.res, true
}

// List returns the kind's resources in a namespace ("" = all), sorted by
// namespace, then name. The slice is the caller's; the resources are shared.
func (s *state) List(kind config.Kind, namespace string) []*config.Resource {
	all := s.sortedKind(kind)
	if namespace == "" {
		return slices.Clone(all)
	}
	lo, _ := slices.BinarySearchFunc(all, namespace, func(r *config.Resource, ns string) int {
		return cmp.Compare(r.Meta.Namespace, ns)
	})
	hi := lo
	for hi < len(all) && all[hi].Meta.Namespace == namespace {
		hi++
	}
	return slices.Clone(all[lo:hi])
}

// sortedKind returns the kind's cached sorted list, building it on first use
// after a change. The cached slice is never modified, only replaced.
func (s *state) sortedKind(kind config.Kind) []*config.Resource {
	s.mu.RLock()
	all, ok := s.sorted[kind]
	s.mu.RUnlock()
	if ok {
		return all
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if all, ok := s.sorted[kind]; ok {
		return all
	}
	all = make([]*config.Resource, 0, len(s.byKind[kind]))
	for _, e := range s.byKind[kind] {
		all = append(all, e.res)
	}
	slices.SortFunc(all, func(a, b *config.Resource) int {
		return cmp.Or(cmp.Compare(a.Meta.Namespace, b.Meta.Namespace), cmp.Compare(a.Meta.Name, b.Meta.Name))
	})
	s.sorted[kind] = all
	return all
}

// Revision is the revision of the last write.
func (s *state) Revision() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.revision
}

// current returns the stored entry for a key; writers call it under their
// write lock, so what they read cannot change before they commit.
func (s *state) current(key config.Key) *entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byKind[key.Kind][key]
}

// snapshot returns every stored entry, for Dir's diff.
func (s *state) snapshot() map[config.Key]*entry {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[config.Key]*entry)
	for _, m := range s.byKind {
		for k, e := range m {
			out[k] = e
		}
	}
	return out
}

// load replaces the whole content without events; it is for opening a store.
func (s *state) load(entries []*entry, revision int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		key := e.res.Key()
		m := s.byKind[key.Kind]
		if m == nil {
			m = make(map[config.Key]*entry)
			s.byKind[key.Kind] = m
		}
		m[key] = e
	}
	clear(s.sorted)
	s.revision = revision
}

// commit publishes a write: the changes become visible, the revision moves to
// rev, and every watcher gets the write's events, all at once.
func (s *state) commit(rev int64, changes []change) {
	events := make([]Event, 0, len(changes))
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range changes {
		m := s.byKind[c.key.Kind]
		if m == nil {
			m = make(map[config.Key]*entry)
			s.byKind[c.key.Kind] = m
		}
		ev := Event{Key: c.key, Revision: rev}
		switch {
		case c.new == nil:
			delete(m, c.key)
			ev.Type, ev.Old = Deleted, c.old.res
		case c.old == nil:
			m[c.key] = c.new
			ev.Type, ev.New = Added, c.new.res
		default:
			m[c.key] = c.new
			ev.Type, ev.Old, ev.New = Updated, c.old.res, c.new.res
		}
		delete(s.sorted, c.key.Kind)
		events = append(events, ev)
	}
	s.revision = rev
	for w := range s.watchers {
		w.enqueue(events, rev)
	}
}

// Watch calls fn for every change after the current revision; see Reader.
func (s *state) Watch(fn func(Event)) (int64, func()) {
	w := newWatcher(fn, s.watchBuffer)
	s.mu.Lock()
	start := s.revision
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	go w.run(s.remove)
	return start, func() {
		s.remove(w)
		w.stop()
	}
}

func (s *state) remove(w *watcher) {
	s.mu.Lock()
	delete(s.watchers, w)
	s.mu.Unlock()
}

// stopWatchers ends every watch; Close calls it.
func (s *state) stopWatchers() {
	s.mu.Lock()
	ws := s.watchers
	s.watchers = make(map[*watcher]struct{})
	s.mu.Unlock()
	for w := range ws {
		w.stop()
	}
}
