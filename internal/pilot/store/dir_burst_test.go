package store

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/model"
	"github.com/meshperf/meshperf/internal/pilot/push"
	"github.com/meshperf/meshperf/internal/testutil"
)

// drivenEvents is a fileEvents the test sends on, so that Dir runs inside a
// synctest bubble (fsnotify's reader sits in a system call, which a bubble
// cannot wait out).
type drivenEvents struct {
	events chan fsnotify.Event
	errs   chan error
}

func newDrivenEvents() *drivenEvents {
	return &drivenEvents{events: make(chan fsnotify.Event), errs: make(chan error)}
}

func (f *drivenEvents) Add(string) error              { return nil }
func (f *drivenEvents) Events() <-chan fsnotify.Event { return f.events }
func (f *drivenEvents) Errors() <-chan error          { return f.errs }
func (f *drivenEvents) Close() error                  { return nil }

// pushRecord is what one debounced push would build its snapshot from: the
// store's DestinationRules' hosts when the push started, and when that was.
type pushRecord struct {
	at    time.Time
	hosts map[string]string
}

// TestDirChangeReachesTheDebounceWithoutAWaitOfItsOwn is the issue's
// "no second quiet period": on the bubble's fake clock, a file event is
// re-read and published before any time passes, so the push starts exactly
// PILOT_DEBOUNCE_AFTER after the last change of a burst. And the burst —
// a file written in two halves, then a second file — is pushed once, with
// both files whole.
func TestDirChangeReachesTheDebounceWithoutAWaitOfItsOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		fe := newDrivenEvents()
		d, err := openDir(dir, nil, buildOptions(nil), fe)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()

		opts := push.DefaultOptions()
		requests := make(chan *model.PushRequest, 64)
		_, stopWatch := d.Watch(func(ev Event) {
			requests <- model.NewPushRequest(model.ReasonConfig, true, time.Now(), ev.Key)
		})
		defer stopWatch()
		var mu sync.Mutex
		var pushes []pushRecord
		deb := push.NewDebouncer(opts, push.RealClock{}, func(*model.PushRequest) {
			hosts := map[string]string{}
			for _, r := range d.List(config.KindDestinationRule, "") {
				hosts[r.Meta.Name] = hostOf(r)
			}
			mu.Lock()
			pushes = append(pushes, pushRecord{at: time.Now(), hosts: hosts})
			mu.Unlock()
		}, nil).WithLogger(slog.New(slog.DiscardHandler))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); deb.Run(ctx, requests) }()

		event := func(name string, op fsnotify.Op) {
			fe.events <- fsnotify.Event{Name: filepath.Join(dir, name), Op: op}
		}
		// An editor writing a.yaml in place, in two writes: the first is a
		// complete document on its own, so a re-read between the writes
		// takes it as the whole file.
		first := drYAML("ns", "a", "a-half")
		whole := drYAML("ns", "a", "a-whole") + "---\n" + drYAML("ns", "a2", "a2-whole")
		writeRaw(t, filepath.Join(dir, "a.yaml"), first)
		start := time.Now()
		event("a.yaml", fsnotify.Create)
		synctest.Wait()
		if got := hostIn(d, "a"); got != "a-half" || time.Since(start) != 0 {
			t.Fatalf("after the first event and no time: host %q, %v passed; want the file re-read at once", got, time.Since(start))
		}

		time.Sleep(opts.DebounceAfter / 2)
		writeRaw(t, filepath.Join(dir, "a.yaml"), whole)
		event("a.yaml", fsnotify.Write)
		time.Sleep(opts.DebounceAfter / 2)
		writeFile(t, filepath.Join(dir, "b.yaml"), drYAML("ns", "b", "b-whole"))
		event(".tmp-b.yaml", fsnotify.Create) // the temporary: skipped
		event("b.yaml", fsnotify.Create)
		last := time.Now()
		time.Sleep(5 * opts.DebounceAfter)
		synctest.Wait()

		mu.Lock()
		got := pushes
		mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("%d pushes, want the burst as one: %+v", len(got), got)
		}
		if wait := got[0].at.Sub(last); wait != opts.DebounceAfter {
			t.Errorf("the push started %v after the burst's last change, want exactly the debounce's %v", wait, opts.DebounceAfter)
		}
		want := map[string]string{"a": "a-whole", "a2": "a2-whole", "b": "b-whole"}
		if fmt.Sprint(got[0].hosts) != fmt.Sprint(want) {
			t.Errorf("the push saw %v, want the burst's final state %v", got[0].hosts, want)
		}
		cancel()
		<-done
	})
}

// TestDirBurstLandsAsItsFinalState writes a burst with real inotify events —
// rename-overs, a file rewritten in place, a directory of files moved in as
// `cp -r` then `mv` does, a file removed — and checks the store ends at the
// burst's final state, every object with its last content.
func TestDirBurstLandsAsItsFinalState(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "gone.yaml"), drYAML("ns", "gone", "gone"))
	d, _ := openTempDir(t, dir)

	want := map[string]string{}
	for i := range 20 {
		name := fmt.Sprintf("r%02d", i)
		for v := range 3 {
			writeFile(t, filepath.Join(dir, name+".yaml"), drYAML("ns", name, fmt.Sprintf("%s-v%d", name, v)))
		}
		want[name] = name + "-v2"
	}
	inPlace := filepath.Join(dir, "in-place.yaml")
	writeRaw(t, inPlace, drYAML("ns", "in-place", "short"))
	appendRaw(t, inPlace, "---\n"+drYAML("ns", "in-place-2", "second"))
	want["in-place"], want["in-place-2"] = "short", "second"
	staging := t.TempDir()
	for i := range 10 {
		name := fmt.Sprintf("copied%02d", i)
		writeFile(t, filepath.Join(staging, "sub", name+".yaml"), drYAML("ns", name, name))
		want[name] = name
	}
	if err := os.Rename(filepath.Join(staging, "sub"), filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone.yaml")); err != nil {
		t.Fatal(err)
	}

	testutil.Eventually(t, hangGuard, func() error {
		got := map[string]string{}
		for _, r := range d.List(config.KindDestinationRule, "") {
			got[r.Meta.Name] = hostOf(r)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("store holds %v\nwant %v", got, want)
		}
		return nil
	})
}

func hostIn(d *Dir, name string) string {
	r, ok := d.Get(drKey("ns", name))
	if !ok {
		return ""
	}
	return hostOf(r)
}

// writeRaw writes in place, as an editor without atomic saves does.
func writeRaw(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendRaw(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
