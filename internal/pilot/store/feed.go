package store

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Feed is a store whose content another source of truth supplies, one
// object at a time: the Kubernetes mode, where the API server's informers
// say what exists (internal/pilot/kube). Each Put or Remove that changes
// something is one revision, with the same events, watch semantics and
// metadata stamping as DB and Dir, so the rest of the control plane cannot
// tell the modes apart. Writes through Writer are refused: the cluster is
// the source of truth, as Dir's files are.
type Feed struct {
	*state         // Get, List, Revision and Watch, as Reader describes them
	cluster string // named by ReadOnlyError

	mu sync.Mutex // serializes Put and Remove: each computes against the state, then commits
}

var _ Store = (*Feed)(nil)

// NewFeed returns an empty feed; cluster names the source for the
// read-only error (the API server's address).
func NewFeed(cluster string, opts ...Option) *Feed {
	o := buildOptions(opts)
	return &Feed{state: newState(o.watchBuffer), cluster: cluster}
}

// Put stores r, replacing the object with its key. An object that does not
// validate is refused with an error matching ErrInvalid and the previous
// content, if any, is kept (as Dir keeps a rejected file's last good
// content): an object someone broke must not take its working version down
// with it. Re-putting an unchanged object makes no revision.
func (f *Feed) Put(r *config.Resource) error {
	if err := config.Validate(r); err != nil {
		return invalidError{fmt.Errorf("%s: %w", r.Key(), err)}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := r.Key()
	prev := f.state.current(key)
	rev := f.state.Revision() + 1
	e, changed, err := stamp(prev, r, rev, time.Now())
	if err != nil {
		return invalidError{err}
	}
	if changed {
		f.state.commit(rev, []change{{key: key, old: prev, new: e}})
	}
	return nil
}

// Remove deletes the object with the key; removing an absent key does
// nothing.
func (f *Feed) Remove(key config.Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev := f.state.current(key)
	if prev == nil {
		return
	}
	f.state.commit(f.state.Revision()+1, []change{{key: key, old: prev}})
}

// Apply always fails: the cluster is the source of truth.
func (f *Feed) Apply(context.Context, []*config.Resource) (int64, error) {
	return 0, &ReadOnlyError{Cluster: f.cluster}
}

// Delete always fails: the cluster is the source of truth.
func (f *Feed) Delete(context.Context, []config.Key) (int64, error) {
	return 0, &ReadOnlyError{Cluster: f.cluster}
}

// Close ends every watch.
func (f *Feed) Close() error {
	f.state.stopWatchers()
	return nil
}
