package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Dir is istiod's --configDir mode: the config is whatever the directory's
// *.yaml, *.yml and *.json files say, read recursively in sorted order. It is
// watched with fsnotify (directories created later included); a change is
// re-read at once, with no quiet period of its own, and the difference from
// the previous state is published as one revision.
//
// Why no quiet period here: the push pipeline's debounce
// (PILOT_DEBOUNCE_AFTER) already waits for a burst to end before it builds
// a snapshot, and it builds it from the store as it is then, so a second
// wait in front of it only added its length to every change. A burst (an
// editor's write-rename, a `cp -r`) stays one consistent push because every
// event is followed by a re-read that starts after it, so the last re-read
// of a burst sees its final files, and the debounce's window is held open
// by each revision until the burst has been quiet for its whole length. A
// file caught half-written is either rejected (it keeps its last good
// content) or read short, and then read again whole on the writer's next
// event, before the debounce lets a push through.
//
// Files and directories whose names start with "." are skipped, so editors'
// lock and swap files are never read, and a Kubernetes ConfigMap mounted as
// the directory is read once, through its top-level links, not again through
// its hidden "..data" timestamped copy.
type Dir struct {
	state *state
	dir   string
	log   *slog.Logger
	fs    fileEvents

	// Only the reload path touches these: OpenDir's first read, then the
	// watch loop's goroutine.
	files  map[string][]*config.Resource // last good content of each file
	stamps map[string]fileStamp          // each file's stamp when its content in files was read
	// paths are the config files of the last re-read, in the order the
	// directory is walked.
	paths []string
	// touched are the config files events named since the last re-read:
	// they are read again whatever their stamp says, and the others are
	// not looked at unless rescan is set, when an event named something
	// else (a directory, a Kubernetes ConfigMap's hidden link swap) and
	// the tree is walked and every file's stamp checked. rereadAll asks the
	// next re-read to read every file, after a watch error lost events.
	touched   map[string]bool
	rescan    bool
	rereadAll bool
	// decoded counts files read and decoded, for tests of what a change
	// costs.
	decoded atomic.Int64
	// stored is, per object, the state's resource for it, which files then
	// holds too: an object whose file was not read again is the same
	// pointer, and commit skips it, so that a re-read costs what changed,
	// not the mesh.
	stored   map[config.Key]*config.Resource
	reported map[string]string // the problem last logged for each file

	done      chan struct{}
	loopDone  chan struct{}
	closeOnce sync.Once
}

var _ Store = (*Dir)(nil)

// OpenDir reads dir and keeps watching it until Close. A file that does not
// decode or validate is logged (one line naming it and the problem) and
// skipped, and later keeps its last good content: config is never dropped
// because someone saved a half-written file.
func OpenDir(dir string, log *slog.Logger, opts ...Option) (*Dir, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("config directory: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("config directory %s is not a directory", dir)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch config directory %s: %w", dir, err)
	}
	return openDir(dir, log, buildOptions(opts), fsnotifyEvents{fsw})
}

// openDir is OpenDir on a given source of file events (tests give one they
// drive, in a synctest bubble).
func openDir(dir string, log *slog.Logger, o options, events fileEvents) (*Dir, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &Dir{
		state:    newState(o.watchBuffer),
		dir:      dir,
		log:      log,
		fs:       events,
		files:    make(map[string][]*config.Resource),
		stamps:   make(map[string]fileStamp),
		touched:  make(map[string]bool),
		stored:   make(map[config.Key]*config.Resource),
		reported: make(map[string]string),
		done:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	// Watch before the first read, so a change made during it is not missed.
	if err := d.watchTree(dir); err != nil {
		_ = events.Close()
		return nil, fmt.Errorf("watch config directory %s: %w", dir, err)
	}
	if err := d.reload(); err != nil {
		_ = events.Close()
		return nil, err
	}
	go d.loop()
	return d, nil
}

// watchTree adds fsnotify watches on root and every directory below it;
// fsnotify is not recursive.
func (d *Dir) watchTree(root string) error {
	return filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == root {
				return err
			}
			return nil // vanished while walking; its removal is an event too
		}
		if !e.IsDir() {
			return nil
		}
		if path != root && hidden(e.Name()) {
			return filepath.SkipDir
		}
		if err := d.fs.Add(path); err != nil && path == root {
			return err
		}
		return nil
	})
}

// loop turns file events into re-reads, at once. Events that queued while
// the last re-read ran are taken together, so a burst costs as many
// re-reads as fit in it, not one per event. One thing paces them: after a
// re-read that took T, the next waits until rereadSpacing*T has passed, so
// that a burst of ten thousand files (a mesh applied as files) does not
// spend a core re-reading a large directory while it is being written.
// A change after a quiet moment is re-read at once: a re-read of a
// directory of a few files takes microseconds, so the wait is nothing.
func (d *Dir) loop() {
	defer close(d.loopDone)
	var (
		stale  bool
		nextAt time.Time        // when the next re-read may start
		spaced <-chan time.Time // fires at nextAt while a re-read waits
	)
	reread := func() {
		began := time.Now()
		d.reloadOrWarn()
		nextAt = time.Now().Add(rereadSpacing * time.Since(began))
		stale, spaced = false, nil
	}
	for {
		select {
		case <-d.done:
			return
		case ev, ok := <-d.fs.Events():
			if !ok {
				return
			}
			stale = d.note(ev) || stale
			for more := true; more; {
				select {
				case ev, ok := <-d.fs.Events():
					if !ok {
						return
					}
					stale = d.note(ev) || stale
				default:
					more = false
				}
			}
		case <-spaced:
			reread()
			continue
		case err, ok := <-d.fs.Errors():
			if !ok {
				return
			}
			// An overflowed inotify queue loses events; a re-read of every
			// file recovers.
			d.log.Warn("config directory watch error", "dir", d.dir, "error", err)
			d.rereadAll, stale = true, true
		}
		if stale && spaced == nil {
			if wait := time.Until(nextAt); wait > 0 {
				spaced = time.After(wait)
			} else {
				reread()
			}
		}
	}
}

// rereadSpacing is how many times its own length a re-read keeps the next
// one waiting: the directory's watch spends at most a fifth of a core.
const rereadSpacing = 4

// note handles one file event, says whether it may have changed the config,
// and records what the re-read must look at: the config file it names, or
// the whole tree. Every event that might change the config costs a re-read,
// now that re-reads are not held back, so the ones that cannot are skipped:
// mode changes (editors and backups touch them), files that are not config,
// and what happens to hidden files (editors' swap files, atomic writers'
// temporaries: their rename into place is a Create of the visible name). A
// hidden directory appearing still counts, and walks the tree, because a
// Kubernetes ConfigMap changes by swapping its "..data" link and nothing
// else.
func (d *Dir) note(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	var info os.FileInfo
	if ev.Has(fsnotify.Create) {
		info, _ = os.Stat(ev.Name)
	}
	newDir := info != nil && info.IsDir()
	if hidden(filepath.Base(ev.Name)) {
		d.rescan = d.rescan || newDir
		return newDir
	}
	switch {
	case configFile(filepath.Base(ev.Name)) && !newDir:
		d.touched[ev.Name] = true
	case newDir || ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
		// A directory came, or something went that may have been one
		// (a name alone cannot tell): walk the tree.
		d.rescan = true
	default:
		return false // a file that is not config was created or written
	}
	if newDir {
		// A new directory may already hold files and subdirectories
		// (mkdir -p, cp -r); the re-read finds the files, this finds the
		// directories.
		if err := d.watchTree(ev.Name); err != nil {
			d.log.Warn("cannot watch new config directory", "dir", ev.Name, "error", err)
		}
	}
	return true
}

func (d *Dir) reloadOrWarn() {
	if err := d.reload(); err != nil {
		d.log.Warn("cannot read config directory, keeping the current config", "dir", d.dir, "error", err)
	}
}

func hidden(name string) bool { return strings.HasPrefix(name, ".") }

func configFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return !hidden(name)
	}
	return false
}

// listFiles returns the directory's config files, recursively, sorted.
func (d *Dir) listFiles() ([]string, error) {
	var files []string
	err := filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if path == d.dir {
				return err
			}
			return nil
		}
		if e.IsDir() {
			if path != d.dir && hidden(e.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if configFile(e.Name()) {
			files = append(files, path)
		}
		return nil
	})
	return files, err // WalkDir visits in lexical order
}

// fileStamp is what tells a file changed without reading it, when no event
// named it: a Kubernetes ConfigMap changes by swapping a link in a hidden
// directory, so its files' events name only that directory, and what they
// resolve to has a new inode.
type fileStamp struct {
	size             int64
	modified, change time.Time
	inode, device    uint64
}

func stampOf(path string) (fileStamp, error) {
	info, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	st := fileStamp{size: info.Size(), modified: info.ModTime()}
	if sys, ok := info.Sys().(*syscall.Stat_t); ok {
		st.inode, st.device = sys.Ino, uint64(sys.Dev)
		st.change = time.Unix(sys.Ctim.Sec, sys.Ctim.Nsec)
	}
	return st, nil
}

// reload re-reads every file that may have changed and commits the difference from the current
// state as one revision (none if nothing changed). A file is read again when an event named it
// since its last read, when its last read failed, or, when the tree is walked, when its stamp
// changed; the others keep their last content without a look, since a burst of writes (a
// mesh of ten thousand files applied at once) re-reads as often as it can, and walking and
// decoding the unchanged files was almost all of its cost. Why events and not stamps alone: a
// file rewritten in place within the file system's timestamp granularity, at the same size,
// keeps its stamp, but every write is an event naming it, queued behind the re-read that read
// its earlier content.
func (d *Dir) reload() error {
	walk := d.paths == nil || d.rescan || d.rereadAll
	var paths []string
	if walk {
		var err error
		if paths, err = d.listFiles(); err != nil {
			return fmt.Errorf("read config directory %s: %w", d.dir, err)
		}
	} else {
		paths = d.pathsAfterEvents()
	}
	files := make(map[string][]*config.Resource, len(paths))
	problems := make(map[string]string)
	kept := make(map[string]bool)
	stamps := make(map[string]fileStamp, len(paths))
	for _, p := range paths {
		last, good := d.files[p]
		lastStamp, readWell := d.stamps[p]
		if good && readWell && !d.rereadAll && !d.touched[p] {
			if !walk {
				files[p], stamps[p] = last, lastStamp
				continue
			}
			if stamp, err := stampOf(p); err == nil && stamp == lastStamp {
				files[p], stamps[p] = last, stamp
				continue
			}
		}
		stamp, stampErr := stampOf(p)
		d.decoded.Add(1)
		rs, err := readConfigFile(p)
		if err == nil && stampErr == nil {
			stamps[p] = stamp
		}
		if err != nil {
			problems[p] = err.Error()
			if last, ok := d.files[p]; ok {
				files[p], kept[p] = last, true
			}
			continue
		}
		files[p] = rs
	}
	d.files, d.stamps, d.paths = files, stamps, paths
	clear(d.touched)
	d.rescan, d.rereadAll = false, false
	want := merge(paths, files, problems)
	d.report(paths, problems, kept)
	d.commit(want)
	// Each file now holds the state's copy of every object it defines rather
	// than its own: the mesh is kept once, not twice (the decoded files were
	// 120 MB of a 10,000-service mesh), and the next re-read finds the
	// pointer commit stored and skips the object.
	for _, p := range paths {
		for i, r := range files[p] {
			k := r.Key()
			if s := d.stored[k]; s != nil && want[k] == r {
				files[p][i] = s
			}
		}
	}
	return nil
}

// pathsAfterEvents is the last re-read's paths with the touched files that
// appeared added and those that went removed, in the walk's order.
func (d *Dir) pathsAfterEvents() []string {
	paths := slices.Clone(d.paths)
	for p := range d.touched {
		i, found := slices.BinarySearchFunc(paths, p, compareWalkOrder)
		info, err := os.Stat(p)
		exists := err == nil && info.Mode().IsRegular()
		switch {
		case exists && !found:
			paths = slices.Insert(paths, i, p)
		case !exists && found:
			paths = slices.Delete(paths, i, i+1)
		}
	}
	return paths
}

// compareWalkOrder orders paths as filepath.WalkDir visits them: by name
// within each directory, a directory's files where its name sorts
// ("a/x.yaml" before "a-b.yaml", unlike a plain string comparison).
func compareWalkOrder(a, b string) int {
	return slices.Compare(strings.Split(a, string(filepath.Separator)), strings.Split(b, string(filepath.Separator)))
}

// readConfigFile decodes one file. An empty file counts as a failure: editors
// that truncate then write, and copies in progress, show an empty file for a
// moment, and a file that is meant to hold nothing is better deleted.
func readConfigFile(path string) ([]*config.Resource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, errors.New("file is empty; delete it to remove its config")
	}
	return config.Decode(path, data)
}

// merge flattens the files, in sorted order, into one resource per key. When
// two files define the same object the first file wins, so the outcome does
// not depend on which was edited last; the later file gets a problem.
func merge(paths []string, files map[string][]*config.Resource, problems map[string]string) map[config.Key]*config.Resource {
	out := make(map[config.Key]*config.Resource)
	from := make(map[config.Key]string)
	for _, p := range paths {
		for _, r := range files[p] {
			k := r.Key()
			if first, ok := from[k]; ok {
				if _, ok := problems[p]; !ok {
					problems[p] = fmt.Sprintf("%s is also defined in %s, which wins", k, first)
				}
				continue
			}
			out[k], from[k] = r, p
		}
	}
	return out
}

// report logs each file's problem once, not at every re-read (which any
// change anywhere in the directory causes), and notes recoveries.
func (d *Dir) report(paths []string, problems map[string]string, kept map[string]bool) {
	for _, p := range paths {
		problem, bad := problems[p]
		last, had := d.reported[p]
		switch {
		case bad && problem != last && kept[p]:
			d.log.Warn("config file rejected, keeping its last good content", "file", p, "error", problem)
		case bad && problem != last:
			d.log.Warn("config file rejected", "file", p, "error", problem)
		case !bad && had:
			d.log.Info("config file is valid again", "file", p)
		}
	}
	clear(d.reported)
	for p, problem := range problems {
		d.reported[p] = problem
	}
}

// commit diffs want against the current state and publishes it.
func (d *Dir) commit(want map[config.Key]*config.Resource) {
	have := d.state.snapshot()
	rev, now := d.state.Revision()+1, time.Now()
	var changes []change
	stored := make(map[config.Key]*config.Resource, len(want))
	for k, r := range want {
		if d.stored[k] == r && have[k] != nil {
			stored[k] = r
			continue
		}
		e, changed, err := stamp(have[k], r, rev, now)
		if err != nil {
			d.log.Warn("config object not stored", "object", k.String(), "error", err)
			continue
		}
		stored[k] = e.res
		if changed {
			changes = append(changes, change{key: k, old: have[k], new: e})
		}
	}
	d.stored = stored
	for k, e := range have {
		if _, ok := want[k]; !ok {
			changes = append(changes, change{key: k, old: e})
		}
	}
	if len(changes) == 0 {
		return
	}
	slices.SortFunc(changes, func(a, b change) int { return compareKeys(a.key, b.key) })
	d.state.commit(rev, changes)
}

func compareKeys(a, b config.Key) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}

// Apply always fails: the files are the source of truth.
func (d *Dir) Apply(context.Context, []*config.Resource) (int64, error) {
	return 0, &ReadOnlyError{Dir: d.dir}
}

// Delete always fails: the files are the source of truth.
func (d *Dir) Delete(context.Context, []config.Key) (int64, error) {
	return 0, &ReadOnlyError{Dir: d.dir}
}

// Close stops watching the directory and ends every watch.
func (d *Dir) Close() error {
	var err error
	d.closeOnce.Do(func() {
		close(d.done)
		err = d.fs.Close()
		<-d.loopDone
		d.state.stopWatchers()
	})
	if err != nil {
		return fmt.Errorf("close config directory watch: %w", err)
	}
	return nil
}

// Get returns the resource with the key, if there is one.
func (d *Dir) Get(key config.Key) (*config.Resource, bool) { return d.state.Get(key) }

// List returns a kind's resources in a namespace ("" = every namespace),
// sorted by namespace, then name.
func (d *Dir) List(kind config.Kind, namespace string) []*config.Resource {
	return d.state.List(kind, namespace)
}

// Revision is the revision of the last change seen in the directory.
func (d *Dir) Revision() int64 { return d.state.Revision() }

// Watch calls fn for every change after the returned revision; see Reader.
func (d *Dir) Watch(fn func(Event)) (int64, func()) { return d.state.Watch(fn) }

// fileEvents is where Dir's file events come from: fsnotify, or a test's.
type fileEvents interface {
	Add(path string) error
	Events() <-chan fsnotify.Event
	Errors() <-chan error
	Close() error
}

type fsnotifyEvents struct{ w *fsnotify.Watcher }

func (f fsnotifyEvents) Add(path string) error         { return f.w.Add(path) }
func (f fsnotifyEvents) Events() <-chan fsnotify.Event { return f.w.Events }
func (f fsnotifyEvents) Errors() <-chan error          { return f.w.Errors }
func (f fsnotifyEvents) Close() error                  { return f.w.Close() }
