package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/testutil"
)

func drYAML(ns, name, host string) string {
	return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata:\n  name: %s\n  namespace: %s\nspec:\n  host: %s\n", name, ns, host)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Write then rename, as careful tools do, so the watcher never sees
	// the file half written unless a test means it to.
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func openTempDir(t *testing.T, dir string) (*Dir, *logBuffer) {
	t.Helper()
	var logs logBuffer
	d, err := OpenDir(dir, logs.logger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d, &logs
}

// waitHost waits until the DestinationRule exists with the host.
func waitHost(t *testing.T, d *Dir, k config.Key, host string) *config.Resource {
	t.Helper()
	var got *config.Resource
	testutil.Eventually(t, hangGuard, func() error {
		r, ok := d.Get(k)
		switch {
		case !ok:
			return fmt.Errorf("%v is not in the store", k)
		case hostOf(r) != host:
			return fmt.Errorf("%v has host %q, want %q", k, hostOf(r), host)
		}
		got = r
		return nil
	})
	return got
}

// waitGone waits until the object is no longer in the store.
func waitGone(t *testing.T, d *Dir, k config.Key) {
	t.Helper()
	testutil.Eventually(t, hangGuard, func() error {
		if _, ok := d.Get(k); ok {
			return fmt.Errorf("%v is still in the store", k)
		}
		return nil
	})
}

func TestDirReadsTheTreeAndFollowsChanges(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), drYAML("a", "one", "h1")+"---\n"+drYAML("a", "two", "h2"))
	writeFile(t, filepath.Join(dir, "sub", "b.json"), `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"a"}}`)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not config")
	writeFile(t, filepath.Join(dir, ".hidden.yaml"), drYAML("a", "hidden", "h"))
	writeFile(t, filepath.Join(dir, ".git", "c.yaml"), drYAML("a", "git", "h"))
	d, _ := openTempDir(t, dir)

	if d.Revision() != 1 {
		t.Errorf("revision after the first read %d, want 1", d.Revision())
	}
	if got := d.List(config.KindDestinationRule, ""); len(got) != 2 || got[0].Meta.Name != "one" || got[1].Meta.Name != "two" {
		t.Fatalf("List = %v", got)
	}
	if _, ok := d.Get(config.Key{Kind: config.KindNamespace, Name: "a"}); !ok {
		t.Error("the subdirectory's JSON file was not read")
	}
	var rec recorder
	start, cancel := d.Watch(rec.add)
	defer cancel()

	// Modify: one revision, one Updated event, a new generation.
	writeFile(t, filepath.Join(dir, "a.yaml"), drYAML("a", "one", "h1")+"---\n"+drYAML("a", "two", "h2-new"))
	two := waitHost(t, d, drKey("a", "two"), "h2-new")
	if two.Meta.Generation != 2 || two.Meta.ResourceVersion != fmt.Sprint(start+1) {
		t.Errorf("modified object: %+v", two.Meta)
	}
	evs := rec.waitEvents(t, 1)
	if evs[0].Type != Updated || evs[0].Key != drKey("a", "two") || evs[0].Revision != start+1 || hostOf(evs[0].Old) != "h2" {
		t.Errorf("modify event %+v", evs[0])
	}

	// Delete a file: its objects go.
	if err := os.Remove(filepath.Join(dir, "sub", "b.json")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, config.Key{Kind: config.KindNamespace, Name: "a"})
	evs = rec.waitEvents(t, 2)
	if evs[1].Type != Deleted || evs[1].Key.Kind != config.KindNamespace || evs[1].Revision != start+2 {
		t.Errorf("delete event %+v", evs[1])
	}

	// A new subdirectory, then a file in it once the directory's own event
	// has been handled: only a watch on the new directory can see the file.
	if err := os.MkdirAll(filepath.Join(dir, "new", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "marker.yaml"), drYAML("m", "marker", "m"))
	waitHost(t, d, drKey("m", "marker"), "m")
	if err := os.WriteFile(filepath.Join(dir, "new", "deeper", "c.yml"), []byte(drYAML("c", "three", "h3")), 0o644); err != nil {
		t.Fatal(err)
	}
	waitHost(t, d, drKey("c", "three"), "h3")

	// Touching a file without changing it makes no revision.
	rev := d.Revision()
	writeFile(t, filepath.Join(dir, "marker.yaml"), drYAML("m", "marker", "m"))
	writeFile(t, filepath.Join(dir, "marker2.yaml"), drYAML("m", "marker2", "m"))
	waitHost(t, d, drKey("m", "marker2"), "m")
	if d.Revision() != rev+1 {
		t.Errorf("revision %d after an unchanged rewrite and one new file, want %d", d.Revision(), rev+1)
	}
}

func TestDirKeepsLastGoodContentOfABadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writeFile(t, path, drYAML("a", "one", "good"))
	writeFile(t, filepath.Join(dir, "new-bad.yaml"), "kind: Nonsense\n")
	d, logs := openTempDir(t, dir)
	if n := logs.lines("new-bad.yaml"); n != 1 {
		t.Errorf("%d log lines name the bad file, want 1:\n%s", n, logs)
	}
	rev := d.Revision()

	writeFile(t, path, drYAML("a", "one", "good")+"  bogusField: 1\n: : :\n")
	logs.waitLine(t, "a.yaml")
	if r, ok := d.Get(drKey("a", "one")); !ok || hostOf(r) != "good" || d.Revision() != rev {
		t.Fatalf("a half-written file dropped or changed its config (revision %d, was %d)", d.Revision(), rev)
	}
	if !strings.Contains(logs.String(), "keeping its last good content") {
		t.Errorf("log does not say the content is kept:\n%s", logs)
	}

	// An empty file (a truncate before a write) is not a deletion either.
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	logs.waitLine(t, "file is empty")

	// Other changes re-read the directory but do not repeat the complaint.
	writeFile(t, filepath.Join(dir, "b.yaml"), drYAML("b", "other", "o"))
	waitHost(t, d, drKey("b", "other"), "o")
	if n := logs.lines("new-bad.yaml"); n != 1 {
		t.Errorf("the bad file was logged %d times, want once:\n%s", n, logs)
	}
	if r, ok := d.Get(drKey("a", "one")); !ok || hostOf(r) != "good" {
		t.Error("the bad file's last good content was lost on a later re-read")
	}

	// Fixed: the new content is taken.
	writeFile(t, path, drYAML("a", "one", "fixed"))
	waitHost(t, d, drKey("a", "one"), "fixed")
	logs.waitLine(t, "valid again")
}

func TestDirFirstFileWinsADuplicate(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "1.yaml"), drYAML("a", "same", "first"))
	writeFile(t, filepath.Join(dir, "2.yaml"), drYAML("a", "same", "second"))
	d, logs := openTempDir(t, dir)
	if r, _ := d.Get(drKey("a", "same")); r == nil || hostOf(r) != "first" {
		t.Errorf("duplicate object: got %v, want the first file's", r)
	}
	if !strings.Contains(logs.String(), "also defined in") {
		t.Errorf("duplicate not logged:\n%s", logs)
	}
}

func TestDirRefusesWrites(t *testing.T) {
	dir := t.TempDir()
	d, _ := openTempDir(t, dir)
	_, err := d.Apply(context.Background(), []*config.Resource{destinationRule("a", "x", "h")})
	if !errors.Is(err, ErrReadOnly) || err.Error() != "config comes from --configDir "+dir+": edit the files there" {
		t.Errorf("Apply: %v", err)
	}
	if _, err := d.Delete(context.Background(), []config.Key{drKey("a", "x")}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Delete: %v", err)
	}
	if d.Revision() != 0 || len(d.List(config.KindDestinationRule, "")) != 0 {
		t.Error("an empty directory is not an empty store at revision 0")
	}
}

func TestOpenDirErrors(t *testing.T) {
	if _, err := OpenDir(filepath.Join(t.TempDir(), "missing"), nil); err == nil {
		t.Error("missing directory accepted")
	}
	file := filepath.Join(t.TempDir(), "f.yaml")
	writeFile(t, file, drYAML("a", "x", "h"))
	if _, err := OpenDir(file, nil); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("file as directory: %v", err)
	}
}

// TestDirChangeRereadsOnlyWhatChanged checks that a change costs what
// changed: a mesh applied as thousands of files is a burst of re-reads, and
// each must not decode the files it did not touch.
func TestDirChangeRereadsOnlyWhatChanged(t *testing.T) {
	dir := t.TempDir()
	for i := range 40 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("dr-%02d.yaml", i)), drYAML("a", fmt.Sprintf("dr-%02d", i), "h"))
	}
	d, _ := openTempDir(t, dir)
	if got := d.decoded.Load(); got != 40 {
		t.Fatalf("the first read decoded %d files, want 40", got)
	}
	writeFile(t, filepath.Join(dir, "dr-07.yaml"), drYAML("a", "dr-07", "changed"))
	waitHost(t, d, drKey("a", "dr-07"), "changed")
	writeFile(t, filepath.Join(dir, "new.yaml"), drYAML("a", "new", "h"))
	waitHost(t, d, drKey("a", "new"), "h")
	if err := os.Remove(filepath.Join(dir, "dr-08.yaml")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, drKey("a", "dr-08"))
	if got := d.decoded.Load() - 40; got != 2 {
		t.Errorf("a changed, an added and a removed file decoded %d files, want 2", got)
	}
	if got := len(d.List(config.KindDestinationRule, "")); got != 40 {
		t.Errorf("%d DestinationRules, want 40", got)
	}
}

// The files' decoded content is not kept beside the state's: each file holds
// the state's object, so a large mesh is in memory once.
func TestDirKeepsOneCopyOfEachObject(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), drYAML("a", "one", "h")+"---\n"+drYAML("a", "two", "h"))
	writeFile(t, filepath.Join(dir, "b.yaml"), drYAML("b", "three", "h"))
	d, _ := openTempDir(t, dir)
	// Until a change, only OpenDir's own read has touched files.
	state := d.state.snapshot()
	n := 0
	for path, rs := range d.files {
		for _, r := range rs {
			n++
			if e := state[r.Key()]; e == nil || e.res != r {
				t.Errorf("%s: %s is the file's own copy, not the state's", path, r.Key())
			}
		}
	}
	if n != 3 {
		t.Errorf("files hold %d objects, want 3", n)
	}
}

// TestDirFollowsRemovedDirectoriesAndConfigMapSwaps covers the events that
// do not name the config files they change: a subdirectory removed whole,
// and a Kubernetes ConfigMap volume, whose files are links through a hidden
// "..data" link that the kubelet swaps to a new hidden directory.
func TestDirFollowsRemovedDirectoriesAndConfigMapSwaps(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "sub", "deeper", "x.yaml"), drYAML("a", "x", "h"))
	writeFile(t, filepath.Join(dir, "..v1", "cm.yaml"), drYAML("a", "cm", "v1"))
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("..v1", "..data")
	link(filepath.Join("..data", "cm.yaml"), "cm.yaml")
	d, _ := openTempDir(t, dir)
	waitHost(t, d, drKey("a", "x"), "h")
	waitHost(t, d, drKey("a", "cm"), "v1")

	if err := os.RemoveAll(filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	waitGone(t, d, drKey("a", "x"))

	writeFile(t, filepath.Join(dir, "..v2", "cm.yaml"), drYAML("a", "cm", "v2"))
	link("..v2", "..data_tmp")
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	waitHost(t, d, drKey("a", "cm"), "v2")
}
