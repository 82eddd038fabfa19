// Package store is the control plane's configuration store: the single source of
// truth for config, and the only place the rest of pilot reads it from.
//
// Three implementations sit behind one Reader. DB is the embedded store, a bbolt
// file that `meshperf apply` writes through Writer; every write is one fsynced
// transaction that bumps the store revision once. Dir is istiod's --configDir
// mode: a directory of YAML/JSON files, watched with fsnotify, whose whole
// content is re-read after a change and diffed against the previous state.
// Feed is filled object by object by something that watches another source
// of truth: the Kubernetes API server's informers (internal/pilot/kube).
// All three keep the decoded resources in memory, so reads never touch the disk, and
// all fan changes out to in-process watchers in revision order.
//
// Resources handed out by Get, List and events are shared by every reader and
// must not be modified.
package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Reader is what the rest of the control plane reads config through.
type Reader interface {
	// Get returns the resource with the key, if there is one.
	Get(key config.Key) (*config.Resource, bool)
	// List returns the resources of a kind in a namespace ("" = every
	// namespace), sorted by namespace, then name.
	List(kind config.Kind, namespace string) []*config.Resource
	// Revision is the revision of the last write (0 for an empty store).
	Revision() int64
	// Watch calls fn for every change after the current revision, in revision
	// order, from one goroutine, until cancel. It returns the revision it starts
	// after, so that a caller can List then Watch (or Watch then List, keeping
	// only events after the listed revision) without missing or repeating
	// anything. A watcher that falls too far behind gets one Resync event and
	// is stopped; see Resync.
	Watch(fn func(Event)) (startRevision int64, cancel func())
}

// Writer is the embedded store's write side.
type Writer interface {
	// Apply creates or updates resources, all or nothing, and returns the
	// store's revision after the write.
	Apply(ctx context.Context, rs []*config.Resource) (revision int64, err error)
	// Delete removes resources, all or nothing; deleting a missing key is an
	// error naming it.
	Delete(ctx context.Context, keys []config.Key) (revision int64, err error)
}

// Store is a Reader that can also be written to (or says why it cannot: Dir's
// writes fail with an error that matches ErrReadOnly).
type Store interface {
	Reader
	Writer
	Close() error
}

// EventType says what happened to a resource.
type EventType int

// The event types.
const (
	Added EventType = iota + 1
	Updated
	Deleted
	// Resync tells a watcher that it fell more than its buffer behind. Its
	// undelivered events were dropped and its watch has ended: it must List
	// again and Watch again. Key, Old and New are empty; Revision is the
	// store's revision when the watcher overflowed.
	//
	// Why not an unbounded buffer: a stuck watcher would then grow memory
	// without limit inside the control plane, and a watcher that is that far
	// behind is better served by one fresh List than by replaying thousands
	// of stale events (the same reasoning as an informer's relist).
	Resync
)

// String names the type, for logs.
func (t EventType) String() string {
	switch t {
	case Added:
		return "Added"
	case Updated:
		return "Updated"
	case Deleted:
		return "Deleted"
	case Resync:
		return "Resync"
	}
	return "EventType(" + strconv.Itoa(int(t)) + ")"
}

// Event is one change. All the events of one write share its Revision.
type Event struct {
	Type     EventType
	Key      config.Key
	Old, New *config.Resource // Old is nil for Added, New is nil for Deleted
	Revision int64
}

// ErrReadOnly matches the error that Dir's Apply and Delete return: config
// comes from files, so writes through the API are refused. The HTTP API can
// test for it with errors.Is and answer 405/409 instead of 500.
var ErrReadOnly = errors.New("config store is read-only")

// ReadOnlyError is the error Dir's and Feed's writes return. It names
// where the config comes from: Dir's directory, or the Kubernetes API
// server a Feed is filled from (Cluster).
type ReadOnlyError struct{ Dir, Cluster string }

// Error says where the config comes from and what to do instead.
func (e *ReadOnlyError) Error() string {
	if e.Cluster != "" {
		return "config comes from the Kubernetes API server " + e.Cluster + ": change it there (kubectl apply -f FILE)"
	}
	return "config comes from --configDir " + e.Dir + ": edit the files there"
}

// Is makes errors.Is(err, ErrReadOnly) true.
func (e *ReadOnlyError) Is(target error) bool { return target == ErrReadOnly }

// ErrClosed is returned by writes to a closed store.
var ErrClosed = errors.New("config store is closed")

// ErrNotFound matches a Delete's error for a key that is not stored.
var ErrNotFound = errors.New("not found")

// ErrInvalid matches an Apply's error for a batch that was rejected before
// anything was written because of what it holds (an invalid object, a key
// given twice), as opposed to a storage failure: a 400, not a 500.
var ErrInvalid = errors.New("invalid config")

// invalidError marks an error as ErrInvalid without changing its message.
type invalidError struct{ err error }

func (e invalidError) Error() string           { return e.err.Error() }
func (e invalidError) Unwrap() error           { return e.err }
func (e invalidError) Is(target error) bool    { return target == ErrInvalid }
func invalid(format string, args ...any) error { return invalidError{fmt.Errorf(format, args...)} }

// Defaults for the options.
const (
	// DefaultWatchBuffer is how many events a watcher may fall behind before
	// it is told to resync. It is large enough for a batch apply of a few
	// thousand resources to a watcher that is momentarily busy.
	DefaultWatchBuffer = 8192
	// DefaultLockTimeout is how long Open waits for another holder of the
	// file to let go before failing.
	DefaultLockTimeout = time.Second
)

// Option tunes Open or OpenDir.
type Option func(*options)

type options struct {
	watchBuffer int
	lockTimeout time.Duration
}

func buildOptions(opts []Option) options {
	o := options{watchBuffer: DefaultWatchBuffer, lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithWatchBuffer sets how many undelivered events a watcher may hold before
// it gets a Resync event (minimum 1).
func WithWatchBuffer(n int) Option {
	return func(o *options) { o.watchBuffer = max(n, 1) }
}

// WithLockTimeout sets how long Open waits for the file lock.
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) { o.lockTimeout = max(d, time.Millisecond) }
}
