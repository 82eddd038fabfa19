package ca

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestGetSharesPerIdentity(t *testing.T) {
	ca := mustOpen(t, t.TempDir())
	a1, err := ca.Get("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := ca.Get("default", "sleep")
	b, _ := ca.Get("default", "httpbin")
	c, _ := ca.Get("other", "sleep")
	if a1 != a2 {
		t.Error("two Gets of one identity issued two certificates")
	}
	if a1 == b || a1 == c || b == c {
		t.Error("different identities share a certificate")
	}
	if b.SPIFFEID != "spiffe://cluster.local/ns/default/sa/httpbin" || c.SPIFFEID != "spiffe://cluster.local/ns/other/sa/sleep" {
		t.Errorf("SPIFFE IDs %s, %s", b.SPIFFEID, c.SPIFFEID)
	}
	if fresh, _ := ca.Issue("default", "sleep"); fresh == a1 {
		t.Error("Issue returned the cached certificate")
	}
	if again, _ := ca.Get("default", "sleep"); again != a1 {
		t.Error("Issue replaced the cached certificate")
	}
}

func TestRotationAtHalfLifetime(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now))
	t0 := clock.Now()
	if !ca.NextRotation().IsZero() {
		t.Fatal("NextRotation is set with nothing cached")
	}
	w1, err := ca.Get("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	half := t0.Add(12 * time.Hour)
	if got := ca.NextRotation(); !got.Equal(half) {
		t.Fatalf("NextRotation = %v, want %v (50%% of 24h)", got, half)
	}

	clock.Set(half.Add(-time.Nanosecond))
	if got := ca.RotateDue(clock.Now()); len(got) != 0 {
		t.Errorf("RotateDue before the rotation point = %v, want none", got)
	}
	if w, _ := ca.Get("default", "sleep"); w != w1 {
		t.Error("Get re-issued before the rotation point")
	}

	clock.Set(half)
	if got := ca.RotateDue(clock.Now()); !slices.Equal(got, []Identity{{"default", "sleep"}}) {
		t.Fatalf("RotateDue at the rotation point = %v, want [default/sleep]", got)
	}
	w2, _ := ca.Get("default", "sleep")
	if w2 == w1 {
		t.Fatal("RotateDue did not replace the cached certificate")
	}
	if !w2.NotAfter.Equal(half.Add(24*time.Hour)) || !w2.RotateAt.Equal(half.Add(12*time.Hour)) {
		t.Errorf("re-issued NotAfter/RotateAt = %v/%v", w2.NotAfter, w2.RotateAt)
	}
	if err := VerifyWorkload(ca.RootPEM(), w2.CertChainPEM, w2.SPIFFEID, clock.Now()); err != nil {
		t.Error(err)
	}
	if got := ca.NextRotation(); !got.Equal(w2.RotateAt) {
		t.Errorf("NextRotation after rotating = %v, want %v", got, w2.RotateAt)
	}
	if got := ca.RotateDue(clock.Now()); len(got) != 0 {
		t.Errorf("second RotateDue = %v, want none", got)
	}
}

func TestGraceRatio(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now), WithGracePeriodRatio(0.25), WithWorkloadCertTTL(time.Hour))
	w, err := ca.Get("default", "sleep")
	if err != nil {
		t.Fatal(err)
	}
	// Istio's rule: rotate when the ratio's share of the lifetime is left.
	if want := clock.Now().Add(45 * time.Minute); !w.RotateAt.Equal(want) {
		t.Errorf("RotateAt = %v, want %v", w.RotateAt, want)
	}
}

// When Get itself replaces a due certificate (a proxy connected first), the
// other proxies of that identity still hold the old one; RotateDue must still
// name the identity, or they would never get the new one pushed.
func TestRotationByGetIsReported(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now))
	w1, _ := ca.Get("default", "sleep")
	other, _ := ca.Get("default", "other")

	clock.Set(w1.RotateAt.Add(time.Minute))
	w2, _ := ca.Get("default", "sleep")
	if w2 == w1 {
		t.Fatal("Get did not re-issue a due certificate")
	}
	if got := ca.NextRotation(); !got.Equal(w1.RotateAt) {
		t.Errorf("NextRotation = %v, want the replaced certificate's %v so the push is not missed", got, w1.RotateAt)
	}
	got := ca.RotateDue(clock.Now())
	want := []Identity{{"default", "other"}, {"default", "sleep"}}
	if !slices.Equal(got, want) {
		t.Fatalf("RotateDue = %v, want %v", got, want)
	}
	if w, _ := ca.Get("default", "sleep"); w != w2 {
		t.Error("RotateDue re-issued a certificate Get had just issued")
	}
	if w, _ := ca.Get("default", "other"); w == other {
		t.Error("RotateDue did not re-issue the due certificate")
	}
	if got := ca.RotateDue(clock.Now()); len(got) != 0 {
		t.Errorf("second RotateDue = %v, want none", got)
	}
	if got := ca.NextRotation(); !got.Equal(w2.RotateAt) {
		t.Errorf("NextRotation = %v, want %v", got, w2.RotateAt)
	}
}

func TestForget(t *testing.T) {
	ca := mustOpen(t, t.TempDir())
	w1, _ := ca.Get("default", "sleep")
	ca.Forget("default", "sleep")
	if !ca.NextRotation().IsZero() {
		t.Error("forgotten identity still scheduled")
	}
	if w2, _ := ca.Get("default", "sleep"); w2 == w1 {
		t.Error("Get after Forget returned the forgotten certificate")
	}
}

func TestConcurrentGetIssuesOncePerIdentity(t *testing.T) {
	ca := mustOpen(t, t.TempDir())
	const identities, perIdentity = 8, 64
	results := make([][]*Workload, identities)
	for i := range results {
		results[i] = make([]*Workload, perIdentity)
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range identities {
		for j := range perIdentity {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				w, err := ca.Get("ns", fmt.Sprintf("sa-%d", i))
				if err != nil {
					t.Error(err)
				}
				results[i][j] = w
			}()
		}
	}
	close(start)
	wg.Wait()
	for i, ws := range results {
		for _, w := range ws {
			if w != ws[0] {
				t.Fatalf("identity sa-%d: concurrent Gets issued more than one certificate", i)
			}
		}
		if want := fmt.Sprintf("spiffe://cluster.local/ns/ns/sa/sa-%d", i); ws[0].SPIFFEID != want {
			t.Errorf("got %s, want %s", ws[0].SPIFFEID, want)
		}
	}
}

// Rotation racing with Gets must hand every caller a valid certificate and
// leave exactly one current certificate per identity.
func TestConcurrentRotateAndGet(t *testing.T) {
	clock := newFakeClock()
	ca := mustOpen(t, t.TempDir(), WithClock(clock.Now))
	w1, _ := ca.Get("ns", "sa")
	clock.Set(w1.RotateAt)
	var wg sync.WaitGroup
	got := make([]*Workload, 32)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%4 == 0 {
				ca.RotateDue(clock.Now())
			}
			got[i], _ = ca.Get("ns", "sa")
		}()
	}
	wg.Wait()
	for _, w := range got {
		if w == nil || w == w1 || w != got[0] {
			t.Fatal("callers got different or stale certificates after a concurrent rotation")
		}
	}
}
