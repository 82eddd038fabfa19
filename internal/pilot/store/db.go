package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// The bbolt layout. "meta" holds the schema version and the store revision
// (8 bytes, big endian); "resources" maps "KIND/NAMESPACE/NAME" (NAMESPACE
// empty for cluster-scoped kinds; none of the three may contain "/") to
// config.Encode's bytes for that object.
var (
	bucketMeta      = []byte("meta")
	bucketResources = []byte("resources")
	keySchema       = []byte("schema")
	keyRevision     = []byte("revision")
	schemaVersion   = []byte("1")
)

// DB is the embedded configuration store, kept in one bbolt file. Reads are
// served from memory; writes go through one bbolt transaction each, committed
// (and fsynced) before they are visible or acknowledged.
type DB struct {
	state *state
	bolt  *bolt.DB
	path  string

	writeMu sync.Mutex // serializes writes, so each sees the state it changes
	closed  bool       // under writeMu
}

var _ Store = (*DB)(nil)

// Open opens (creating if needed) the store file at path and loads it. The file
// is locked while open: a second Open of it, from this process or another,
// fails after the lock timeout (1 s by default) instead of hanging.
func Open(path string, opts ...Option) (*DB, error) {
	o := buildOptions(opts)
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.lockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open config store %s: another process (or this one) has it open; stop it or use another file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("open config store %s: %w", path, err)
	}
	db := &DB{state: newState(o.watchBuffer), bolt: bdb, path: path}
	if err := db.load(); err != nil {
		_ = bdb.Close()
		return nil, fmt.Errorf("open config store %s: %w", path, err)
	}
	return db, nil
}

// load creates the buckets of a new file, checks the schema of an old one and
// reads everything into memory.
func (db *DB) load() error {
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketResources); err != nil {
			return err
		}
		switch v := meta.Get(keySchema); {
		case v == nil:
			return meta.Put(keySchema, schemaVersion)
		case string(v) != string(schemaVersion):
			return fmt.Errorf("schema version %q, this meshperf reads %q", v, schemaVersion)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var entries []*entry
	var rev int64
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketMeta).Get(keyRevision); v != nil {
			if len(v) != 8 {
				return fmt.Errorf("revision is %d bytes, want 8", len(v))
			}
			rev = int64(binary.BigEndian.Uint64(v))
		}
		return tx.Bucket(bucketResources).ForEach(func(k, v []byte) error {
			res, err := decodeStored(string(k), v)
			if err != nil {
				return err
			}
			if got := string(boltKey(res.Key())); got != string(k) {
				return fmt.Errorf("object stored under %s is %s", k, got)
			}
			// bbolt's bytes are only valid inside the transaction.
			entries = append(entries, &entry{res: res, raw: append([]byte(nil), v...)})
			return nil
		})
	})
	if err != nil {
		return err
	}
	db.state.load(entries, rev)
	return nil
}

func boltKey(k config.Key) []byte {
	return []byte(string(k.Kind) + "/" + k.Namespace + "/" + k.Name)
}

func revisionBytes(rev int64) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(rev))
}

// Apply creates or updates resources in one transaction; see Writer. Every
// resource is validated first, and the first invalid one fails the whole
// Apply before anything is written. A batch that changes nothing returns the
// current revision without writing.
func (db *DB) Apply(ctx context.Context, rs []*config.Resource) (int64, error) {
	if err := checkBatch(rs); err != nil {
		return 0, err
	}
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if err := db.writable(ctx); err != nil {
		return 0, fmt.Errorf("apply: %w", err)
	}
	cur := db.state.Revision()
	rev, now := cur+1, time.Now()
	var changes []change
	for _, r := range rs {
		prev := db.state.current(r.Key())
		e, changed, err := stamp(prev, r, rev, now)
		if err != nil {
			return 0, fmt.Errorf("apply %w", err)
		}
		if changed {
			changes = append(changes, change{key: r.Key(), old: prev, new: e})
		}
	}
	if len(changes) == 0 {
		return cur, nil
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketResources)
		for _, c := range changes {
			if err := b.Put(boltKey(c.key), c.new.raw); err != nil {
				return fmt.Errorf("%s: %w", c.key, err)
			}
		}
		return tx.Bucket(bucketMeta).Put(keyRevision, revisionBytes(rev))
	})
	if err != nil {
		return 0, fmt.Errorf("apply: write %s: %w", db.path, err)
	}
	db.state.commit(rev, changes)
	return rev, nil
}

// checkBatch validates a batch before any lock is taken: nil entries,
// duplicate keys (which of two versions should win is the caller's business)
// and config.Validate, reporting the first problem.
func checkBatch(rs []*config.Resource) error {
	seen := make(map[config.Key]bool, len(rs))
	for i, r := range rs {
		if r == nil {
			return invalid("apply: resource %d is nil", i)
		}
		k := r.Key()
		if err := config.Validate(r); err != nil {
			return invalid("apply %s: %w", k, err)
		}
		if err := checkKey(k); err != nil {
			return invalid("apply %s: %w", k, err)
		}
		if seen[k] {
			return invalid("apply %s: given twice in one apply", k)
		}
		seen[k] = true
	}
	return nil
}

// checkKey guards the bbolt key format, whatever Validate accepts.
func checkKey(k config.Key) error {
	if k.Name == "" || strings.Contains(k.Name, "/") || strings.Contains(k.Namespace, "/") || strings.Contains(string(k.Kind), "/") {
		return errors.New("kind, namespace and name must be non-empty (namespace empty for cluster-scoped kinds) and contain no '/'")
	}
	if k.Kind.ClusterScoped() != (k.Namespace == "") {
		if k.Namespace == "" {
			return errors.New("metadata.namespace is required")
		}
		return errors.New("cluster-scoped, so metadata.namespace must be empty")
	}
	return nil
}

// Delete removes resources in one transaction; see Writer.
func (db *DB) Delete(ctx context.Context, keys []config.Key) (int64, error) {
	seen := make(map[config.Key]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return 0, invalid("delete %s: given twice in one delete", k)
		}
		seen[k] = true
	}
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if err := db.writable(ctx); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	cur := db.state.Revision()
	if len(keys) == 0 {
		return cur, nil
	}
	changes := make([]change, 0, len(keys))
	for _, k := range keys {
		prev := db.state.current(k)
		if prev == nil {
			return 0, fmt.Errorf("delete %s: %w", k, ErrNotFound)
		}
		changes = append(changes, change{key: k, old: prev})
	}
	rev := cur + 1
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketResources)
		for _, c := range changes {
			if err := b.Delete(boltKey(c.key)); err != nil {
				return fmt.Errorf("%s: %w", c.key, err)
			}
		}
		return tx.Bucket(bucketMeta).Put(keyRevision, revisionBytes(rev))
	})
	if err != nil {
		return 0, fmt.Errorf("delete: write %s: %w", db.path, err)
	}
	db.state.commit(rev, changes)
	return rev, nil
}

// writable is checked under writeMu: a write after Close, or for a caller
// that has given up, must not start a transaction. A transaction that has
// started is not interrupted; bbolt cannot abandon a commit half way.
func (db *DB) writable(ctx context.Context) error {
	if db.closed {
		return ErrClosed
	}
	return ctx.Err()
}

// Close ends every watch and closes the file. Reads keep answering from
// memory; writes fail with ErrClosed.
func (db *DB) Close() error {
	db.writeMu.Lock()
	defer db.writeMu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	db.state.stopWatchers()
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close config store %s: %w", db.path, err)
	}
	return nil
}

// Path is the store's file.
func (db *DB) Path() string { return db.path }

// Get returns the resource with the key, if there is one.
func (db *DB) Get(key config.Key) (*config.Resource, bool) { return db.state.Get(key) }

// List returns a kind's resources in a namespace ("" = every namespace),
// sorted by namespace, then name.
func (db *DB) List(kind config.Kind, namespace string) []*config.Resource {
	return db.state.List(kind, namespace)
}

// Revision is the revision of the last write.
func (db *DB) Revision() int64 { return db.state.Revision() }

// Watch calls fn for every change after the returned revision; see Reader.
func (db *DB) Watch(fn func(Event)) (int64, func()) { return db.state.Watch(fn) }
