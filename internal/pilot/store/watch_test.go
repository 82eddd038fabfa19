package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/testutil"
)

// writeConcurrently runs writers goroutines, each applying perWriter
// single-object writes (a create, then updates), so revisions 1..N each carry
// exactly one event.
func writeConcurrently(t *testing.T, db *DB, writers, perWriter int) *sync.WaitGroup {
	t.Helper()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				r := destinationRule(fmt.Sprint("ns", w%2), fmt.Sprint("w", w), fmt.Sprint("h", i))
				if _, err := db.Apply(context.Background(), []*config.Resource{r}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	return &wg
}

func TestWatchDeliversEveryChangeInOrder(t *testing.T) {
	db := openTemp(t)
	var rec recorder
	start, cancel := db.Watch(rec.add)
	defer cancel()
	const writers, perWriter = 4, 30
	writeConcurrently(t, db, writers, perWriter).Wait()
	evs := rec.waitEvents(t, writers*perWriter)
	last := make(map[config.Key]*config.Resource)
	for i, ev := range evs {
		if ev.Revision != start+int64(i)+1 {
			t.Fatalf("event %d has revision %d, want %d", i, ev.Revision, start+int64(i)+1)
		}
		prev := last[ev.Key]
		want := Updated
		if prev == nil {
			want = Added
		}
		if ev.Type != want || ev.Old != prev || ev.New.Meta.ResourceVersion != fmt.Sprint(ev.Revision) {
			t.Fatalf("event %d: %v %s old %p (want %v, old %p)", i, ev.Type, ev.Key, ev.Old, want, prev)
		}
		last[ev.Key] = ev.New
	}
	for k, r := range last {
		if got, _ := db.Get(k); got != r {
			t.Errorf("%s: last event's object is not the stored one", k)
		}
	}
}

// TestListThenWatchMissesAndRepeatsNothing builds a replica from a list and
// the events after it while writers are busy, and checks that it ends equal
// to the store, with no event at or before the listed revision.
func TestListThenWatchMissesAndRepeatsNothing(t *testing.T) {
	db := openTemp(t)
	if _, err := db.Apply(context.Background(), []*config.Resource{destinationRule("ns0", "w0", "seed")}); err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 4, 40
	wg := writeConcurrently(t, db, writers, perWriter)

	var mu sync.Mutex
	replica := make(map[config.Key]string)
	var seen []int64
	listedAt, cancel := ListWatch(db, func() {
		mu.Lock()
		defer mu.Unlock()
		clear(replica)
		for _, r := range db.List(config.KindDestinationRule, "") {
			replica[r.Key()] = r.Meta.ResourceVersion
		}
	}, func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, ev.Revision)
		replica[ev.Key] = ev.New.Meta.ResourceVersion
	})
	defer cancel()
	// Plain Watch must start exactly where it says, too.
	var rec recorder
	start, cancel2 := db.Watch(rec.add)
	defer cancel2()

	wg.Wait()
	final := db.Revision()
	testutil.Eventually(t, hangGuard, func() error {
		mu.Lock()
		defer mu.Unlock()
		if n := int64(len(seen)); n != final-listedAt {
			return fmt.Errorf("%d events after the list at revision %d, want %d", n, listedAt, final-listedAt)
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i, rev := range seen {
		if rev != listedAt+int64(i)+1 {
			t.Fatalf("list at %d, then events at %v: missed or repeated", listedAt, seen)
		}
	}
	want := db.List(config.KindDestinationRule, "")
	if len(replica) != len(want) {
		t.Errorf("replica has %d objects, store %d", len(replica), len(want))
	}
	for _, r := range want {
		if replica[r.Key()] != r.Meta.ResourceVersion {
			t.Errorf("%s: replica at resourceVersion %s, store at %s", r.Key(), replica[r.Key()], r.Meta.ResourceVersion)
		}
	}
	if start < final {
		if evs := rec.waitEvents(t, int(final-start)); evs[0].Revision != start+1 {
			t.Errorf("Watch started after %d but its first event is at %d", start, evs[0].Revision)
		}
	}
}

func TestSlowWatcherDoesNotBlockWritersAndIsToldToResync(t *testing.T) {
	const buffer = 3
	db := openTemp(t, WithWatchBuffer(buffer))
	release := make(chan struct{})
	var rec recorder
	_, cancel := db.Watch(func(ev Event) {
		<-release
		rec.add(ev)
	})
	defer cancel()
	const writes = 10
	for i := range writes {
		// Each Apply returning while the first watcher is stuck is the point.
		if _, err := db.Apply(context.Background(), []*config.Resource{destinationRule("a", fmt.Sprint("r", i), "h")}); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	evs := waitForResync(t, &rec)
	regular := evs[:len(evs)-1]
	if len(regular) > buffer+1 {
		t.Errorf("slow watcher got %d events before Resync, buffer is %d", len(regular), buffer)
	}
	for i, ev := range regular {
		if ev.Type != Added || ev.Revision != int64(i+1) {
			t.Errorf("event %d before Resync: %+v", i, ev)
		}
	}
	resync := evs[len(evs)-1]
	if resync.Revision <= int64(len(regular)) || resync.Revision > writes || resync.New != nil {
		t.Errorf("Resync event %+v after %d events", resync, len(regular))
	}
	// The ended watch gets nothing more; a new watch works.
	var again recorder
	_, cancelAgain := db.Watch(again.add)
	defer cancelAgain()
	if _, err := db.Apply(context.Background(), []*config.Resource{destinationRule("a", "after", "h")}); err != nil {
		t.Fatal(err)
	}
	if got := again.waitEvents(t, 1); got[0].Revision != writes+1 {
		t.Errorf("new watch after a Resync got %+v", got[0])
	}
	if got := rec.get(); len(got) != len(evs) {
		t.Errorf("watcher got %d events after its Resync", len(got)-len(evs))
	}
}

func waitForResync(t *testing.T, rec *recorder) []Event {
	t.Helper()
	testutil.Eventually(t, hangGuard, func() error {
		if evs := rec.get(); len(evs) == 0 || evs[len(evs)-1].Type != Resync {
			return fmt.Errorf("the last of %d events is not a Resync", len(evs))
		}
		return nil
	})
	return rec.get()
}

func TestCancelAndCloseStopDelivery(t *testing.T) {
	db := openTemp(t)
	var cancelled, open, closed recorder
	_, cancel := db.Watch(cancelled.add)
	_, cancelOpen := db.Watch(open.add)
	defer cancelOpen()
	_, cancelClosed := db.Watch(closed.add)
	cancel()
	cancel() // twice is harmless
	if _, err := db.Apply(context.Background(), []*config.Resource{destinationRule("a", "x", "h")}); err != nil {
		t.Fatal(err)
	}
	open.waitEvents(t, 1)
	if got := cancelled.get(); len(got) != 0 {
		t.Errorf("cancelled watcher got %v", got)
	}
	closed.waitEvents(t, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cancelClosed() // after Close is harmless
	if got := closed.get(); len(got) != 1 {
		t.Errorf("watcher got %d events, want 1", len(got))
	}
}

func TestEventTypeString(t *testing.T) {
	for typ, want := range map[EventType]string{Added: "Added", Updated: "Updated", Deleted: "Deleted", Resync: "Resync", 42: "EventType(42)"} {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", int(typ), got, want)
		}
	}
}
