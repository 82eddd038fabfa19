package store

import (
	"context"
	"errors"
	"testing"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func TestFeedPutRemoveWatchAndReadOnly(t *testing.T) {
	f := NewFeed("https://198.18.0.1:6443")
	defer f.Close()
	var rec recorder
	start, cancel := f.Watch(rec.add)
	defer cancel()
	if start != 0 {
		t.Fatalf("an empty feed watches from %d", start)
	}
	if err := f.Put(destinationRule("shop", "cart", "cart")); err != nil {
		t.Fatal(err)
	}
	// The same object again (an informer's resync) is no revision.
	if err := f.Put(destinationRule("shop", "cart", "cart")); err != nil {
		t.Fatal(err)
	}
	if err := f.Put(destinationRule("shop", "cart", "cart.shop.svc.cluster.local")); err != nil {
		t.Fatal(err)
	}
	// An invalid version is refused and the last valid one kept.
	err := f.Put(destinationRule("shop", "cart", ""))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid object: err %v, want ErrInvalid", err)
	}
	if r, ok := f.Get(drKey("shop", "cart")); !ok || hostOf(r) != "cart.shop.svc.cluster.local" {
		t.Errorf("after the invalid version the store holds %v", r)
	}
	f.Remove(drKey("shop", "cart"))
	f.Remove(drKey("shop", "cart")) // absent: nothing
	evs := rec.waitEvents(t, 3)
	want := []EventType{Added, Updated, Deleted}
	if len(evs) != len(want) {
		t.Fatalf("%d events, want %d", len(evs), len(want))
	}
	for i, ev := range evs {
		if ev.Type != want[i] || ev.Revision != int64(i+1) {
			t.Errorf("event %d: %s at revision %d, want %s at %d", i, ev.Type, ev.Revision, want[i], i+1)
		}
	}
	if evs[1].New.Meta.Generation != 2 || evs[1].New.Meta.ResourceVersion != "2" {
		t.Errorf("updated object's generation %d, resourceVersion %q", evs[1].New.Meta.Generation, evs[1].New.Meta.ResourceVersion)
	}
	if f.Revision() != 3 {
		t.Errorf("revision %d after three changes", f.Revision())
	}
	_, err = f.Apply(context.Background(), []*config.Resource{destinationRule("shop", "x", "x")})
	if !errors.Is(err, ErrReadOnly) || err.Error() != "config comes from the Kubernetes API server https://198.18.0.1:6443: change it there (kubectl apply -f FILE)" {
		t.Errorf("Apply: %v", err)
	}
	if _, err := f.Delete(context.Background(), []config.Key{drKey("shop", "x")}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Delete: %v", err)
	}
}
