package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func TestApplyStampsServerOwnedMetadata(t *testing.T) {
	db := openTemp(t)
	in := destinationRule("shop", "cart", "cart.shop.svc.cluster.local")
	in.Meta.ResourceVersion, in.Meta.Generation = "77", 9 // the writer's values are ignored
	before := time.Now().Truncate(time.Second)
	rev, err := db.Apply(context.Background(), []*config.Resource{in})
	if err != nil || rev != 1 {
		t.Fatalf("Apply = %d, %v; want revision 1", rev, err)
	}
	if in.Meta.ResourceVersion != "77" || in.Meta.Generation != 9 {
		t.Errorf("Apply changed the caller's object: %+v", in.Meta)
	}
	got, ok := db.Get(in.Key())
	if !ok {
		t.Fatal("applied object not found")
	}
	created := got.Meta.CreationTimestamp
	if got.Meta.ResourceVersion != "1" || got.Meta.Generation != 1 || created.Time.Before(before) || created.Time.After(time.Now()) {
		t.Errorf("after create: resourceVersion %q generation %d created %v", got.Meta.ResourceVersion, got.Meta.Generation, created)
	}

	// A label change is an update but not a new generation.
	labelled := destinationRule("shop", "cart", "cart.shop.svc.cluster.local")
	labelled.Meta.Labels = map[string]string{"team": "a"}
	if rev, err := db.Apply(context.Background(), []*config.Resource{labelled}); err != nil || rev != 2 {
		t.Fatalf("label change: Apply = %d, %v; want 2", rev, err)
	}
	got, _ = db.Get(in.Key())
	if got.Meta.ResourceVersion != "2" || got.Meta.Generation != 1 || !got.Meta.CreationTimestamp.Equal(&created) || got.Meta.Labels["team"] != "a" {
		t.Errorf("after label change: %+v", got.Meta)
	}

	// A spec change is a new generation.
	respec := destinationRule("shop", "cart", "cart-v2.shop.svc.cluster.local")
	respec.Meta.Labels = map[string]string{"team": "a"}
	if rev, err := db.Apply(context.Background(), []*config.Resource{respec}); err != nil || rev != 3 {
		t.Fatalf("spec change: Apply = %d, %v; want 3", rev, err)
	}
	got, _ = db.Get(in.Key())
	if got.Meta.ResourceVersion != "3" || got.Meta.Generation != 2 || !got.Meta.CreationTimestamp.Equal(&created) || hostOf(got) != "cart-v2.shop.svc.cluster.local" {
		t.Errorf("after spec change: %+v host %s", got.Meta, hostOf(got))
	}

	// Applying the same object again changes nothing, even with stale
	// server-owned fields.
	var rec recorder
	_, cancel := db.Watch(rec.add)
	defer cancel()
	again := destinationRule("shop", "cart", "cart-v2.shop.svc.cluster.local")
	again.Meta.Labels = map[string]string{"team": "a"}
	again.Meta.ResourceVersion = "1"
	if rev, err := db.Apply(context.Background(), []*config.Resource{again}); err != nil || rev != 3 {
		t.Fatalf("no-op: Apply = %d, %v; want 3", rev, err)
	}
	if same, _ := db.Get(in.Key()); same != got {
		t.Error("a no-op apply replaced the stored object")
	}
	// The next real write must be the first event the watcher sees.
	if _, err := db.Apply(context.Background(), []*config.Resource{destinationRule("shop", "other", "o")}); err != nil {
		t.Fatal(err)
	}
	if evs := rec.waitEvents(t, 1); evs[0].Revision != 4 || evs[0].Key.Name != "other" {
		t.Errorf("first event after a no-op apply: %+v", evs[0])
	}
}

func TestApplyIsAllOrNothing(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "keep", "keep")}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	_, cancel := db.Watch(rec.add)
	defer cancel()

	good := destinationRule("a", "good", "good")
	update := destinationRule("a", "keep", "changed")
	bad := destinationRule("a", "Not_A_Name", "bad")
	worse := destinationRule("a", "", "worse")
	_, err := db.Apply(ctx, []*config.Resource{good, update, bad, worse})
	if err == nil || !strings.Contains(err.Error(), "Not_A_Name") || strings.Contains(err.Error(), "worse") {
		t.Fatalf("Apply with an invalid object: err = %v; want the first bad object's error", err)
	}
	var ve *config.ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Errorf("error %v does not wrap the validation error", err)
	}
	if _, ok := db.Get(good.Key()); ok {
		t.Error("the valid object of a rejected batch was stored")
	}
	if kept, _ := db.Get(update.Key()); hostOf(kept) != "keep" {
		t.Error("the update in a rejected batch was stored")
	}
	if db.Revision() != 1 {
		t.Errorf("revision %d after a rejected apply, want 1", db.Revision())
	}

	_, err = db.Apply(ctx, []*config.Resource{good, destinationRule("a", "good", "twice")})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "twice in one apply") {
		t.Errorf("duplicate key in a batch: err = %v", err)
	}
	if _, err := db.Apply(ctx, []*config.Resource{good, nil}); err == nil {
		t.Error("nil resource accepted")
	}
	if _, ok := db.Get(good.Key()); ok || db.Revision() != 1 {
		t.Error("a rejected batch wrote something")
	}
	// No event either: the next write's event comes first.
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "next", "n")}); err != nil {
		t.Fatal(err)
	}
	if evs := rec.waitEvents(t, 1); evs[0].Key.Name != "next" || evs[0].Revision != 2 {
		t.Errorf("first event after rejected applies: %+v", evs[0])
	}
}

func TestApplyBatchIsOneRevision(t *testing.T) {
	db := openTemp(t)
	var rec recorder
	start, cancel := db.Watch(rec.add)
	defer cancel()
	batch := []*config.Resource{
		destinationRule("b", "two", "two"), destinationRule("a", "one", "one"), namespace("a", nil),
	}
	rev, err := db.Apply(context.Background(), batch)
	if err != nil || start != 0 || rev != 1 {
		t.Fatalf("Apply = %d, %v (watch started at %d)", rev, err, start)
	}
	evs := rec.waitEvents(t, 3)
	for i, ev := range evs {
		if ev.Type != Added || ev.Revision != 1 || ev.Key != batch[i].Key() || ev.Old != nil || ev.New.Meta.ResourceVersion != "1" {
			t.Errorf("event %d: %+v", i, ev)
		}
	}
}

func TestDelete(t *testing.T) {
	db := openTemp(t)
	ctx := context.Background()
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "x", "x"), destinationRule("a", "y", "y"), namespace("a", nil)}); err != nil {
		t.Fatal(err)
	}
	var rec recorder
	_, cancel := db.Watch(rec.add)
	defer cancel()

	missing := drKey("a", "nope")
	_, err := db.Delete(ctx, []config.Key{drKey("a", "x"), missing})
	if !errors.Is(err, ErrNotFound) || err.Error() != "delete "+missing.String()+": not found" {
		t.Fatalf("delete of a missing key: err = %v; want it named", err)
	}
	if _, ok := db.Get(drKey("a", "x")); !ok || db.Revision() != 1 {
		t.Fatal("a failed delete removed something or bumped the revision")
	}
	if _, err := db.Delete(ctx, []config.Key{drKey("a", "x"), drKey("a", "x")}); err == nil {
		t.Error("duplicate key in a delete accepted")
	}

	nsKey := config.Key{Kind: config.KindNamespace, Name: "a"}
	rev, err := db.Delete(ctx, []config.Key{drKey("a", "x"), nsKey})
	if err != nil || rev != 2 {
		t.Fatalf("Delete = %d, %v; want 2", rev, err)
	}
	if _, ok := db.Get(drKey("a", "x")); ok {
		t.Error("deleted object still there")
	}
	if _, ok := db.Get(drKey("a", "y")); !ok {
		t.Error("object not named in the delete is gone")
	}
	evs := rec.waitEvents(t, 2)
	if evs[0].Type != Deleted || evs[0].Key != drKey("a", "x") || evs[0].Old == nil || hostOf(evs[0].Old) != "x" || evs[0].New != nil || evs[0].Revision != 2 {
		t.Errorf("delete event: %+v", evs[0])
	}
	if evs[1].Type != Deleted || evs[1].Key != nsKey {
		t.Errorf("second delete event: %+v", evs[1])
	}
	// Re-creating starts a new object: generation 1, a new resourceVersion.
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "x", "x")}); err != nil {
		t.Fatal(err)
	}
	if r, _ := db.Get(drKey("a", "x")); r.Meta.Generation != 1 || r.Meta.ResourceVersion != "3" {
		t.Errorf("re-created object: %+v", r.Meta)
	}
}

func TestListSortsAndFiltersByNamespace(t *testing.T) {
	db := openTemp(t)
	batch := []*config.Resource{
		destinationRule("b", "z", "h"), destinationRule("a", "y", "h"), destinationRule("b", "a", "h"),
		destinationRule("a", "b", "h"), destinationRule("c", "m", "h"), namespace("b", nil), namespace("a", nil),
	}
	if _, err := db.Apply(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	names := func(rs []*config.Resource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Meta.Namespace+"/"+r.Meta.Name)
		}
		return out
	}
	if got, want := names(db.List(config.KindDestinationRule, "")), []string{"a/b", "a/y", "b/a", "b/z", "c/m"}; !slices.Equal(got, want) {
		t.Errorf("List all = %v, want %v", got, want)
	}
	if got, want := names(db.List(config.KindDestinationRule, "b")), []string{"b/a", "b/z"}; !slices.Equal(got, want) {
		t.Errorf("List b = %v, want %v", got, want)
	}
	if got := db.List(config.KindDestinationRule, "nope"); len(got) != 0 {
		t.Errorf("List of an empty namespace = %v", names(got))
	}
	if got, want := names(db.List(config.KindNamespace, "")), []string{"/a", "/b"}; !slices.Equal(got, want) {
		t.Errorf("List namespaces = %v, want %v", got, want)
	}
	if got := db.List(config.KindVirtualService, ""); len(got) != 0 {
		t.Errorf("List of an absent kind = %v", names(got))
	}
	// The list is the caller's, and the cache follows writes.
	l := db.List(config.KindDestinationRule, "")
	l[0] = nil
	if _, err := db.Delete(context.Background(), []config.Key{drKey("a", "b")}); err != nil {
		t.Fatal(err)
	}
	if got, want := names(db.List(config.KindDestinationRule, "a")), []string{"a/y"}; !slices.Equal(got, want) {
		t.Errorf("List a after delete = %v, want %v", got, want)
	}
}

func TestStoreOwnsItsCopy(t *testing.T) {
	db := openTemp(t)
	in := destinationRule("a", "x", "before")
	if _, err := db.Apply(context.Background(), []*config.Resource{in}); err != nil {
		t.Fatal(err)
	}
	in.Spec.(*networking.DestinationRule).Host = "after"
	if got, _ := db.Get(in.Key()); hostOf(got) != "before" {
		t.Errorf("mutating the applied object changed the store: host %q", hostOf(got))
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", fmt.Sprint("r", i), fmt.Sprint("h", i)), namespace(fmt.Sprint("n", i), map[string]string{"i": fmt.Sprint(i)})}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Delete(ctx, []config.Key{drKey("a", "r2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "r3", "changed")}); err != nil {
		t.Fatal(err)
	}
	wantRev := db.Revision()
	want := append(db.List(config.KindDestinationRule, ""), db.List(config.KindNamespace, "")...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "late", "h")}); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close: err = %v, want ErrClosed", err)
	}

	db, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if db.Revision() != wantRev {
		t.Errorf("revision after reopen %d, want %d", db.Revision(), wantRev)
	}
	got := append(db.List(config.KindDestinationRule, ""), db.List(config.KindNamespace, "")...)
	if len(got) != len(want) {
		t.Fatalf("%d objects after reopen, want %d", len(got), len(want))
	}
	for i := range got {
		if !config.Equal(got[i], want[i]) {
			t.Errorf("after reopen %s differs:\n got %+v\nwant %+v", want[i].Key(), got[i].Meta, want[i].Meta)
		}
	}
	if r3, _ := db.Get(drKey("a", "r3")); r3.Meta.Generation != 2 || r3.Meta.ResourceVersion != fmt.Sprint(wantRev) {
		t.Errorf("r3 after reopen: %+v", r3.Meta)
	}
	if rev, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "late", "h")}); err != nil || rev != wantRev+1 {
		t.Errorf("Apply after reopen = %d, %v; want %d", rev, err, wantRev+1)
	}
}

func TestSecondOpenFailsInsteadOfHanging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		second, err := Open(path, WithLockTimeout(100*time.Millisecond))
		if err == nil {
			second.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "has it open") {
			t.Errorf("second Open: err = %v; want a clear in-use error naming the file", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("second Open hung")
	}
}

func TestApplyHonoursCancelledContext(t *testing.T) {
	db := openTemp(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.Apply(ctx, []*config.Resource{destinationRule("a", "x", "x")}); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply with a cancelled context: err = %v", err)
	}
	if db.Revision() != 0 {
		t.Error("a cancelled Apply wrote")
	}
}
