package ca

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// slot is the cache entry of one identity.
type slot struct {
	// mu serialises issuing, so that a crowd of proxies of one service account
	// connecting at once costs one certificate, not one each.
	mu  sync.Mutex
	cur atomic.Pointer[Workload]
	// replacedAt is the rotation point of a certificate that Get replaced but
	// RotateDue has not reported yet: the proxies still holding it need a push.
	// Nil when there is nothing to report. Written under mu.
	replacedAt atomic.Pointer[time.Time]
}

// Get returns the identity's cached certificate, issuing one on first use and
// again once the cached one has reached its rotation point. Every proxy of a
// service account shares the result.
func (ca *CA) Get(namespace, serviceAccount string) (*Workload, error) {
	id := Identity{Namespace: namespace, ServiceAccount: serviceAccount}
	ca.mu.RLock()
	s := ca.slots[id]
	ca.mu.RUnlock()
	if s != nil {
		if w := s.cur.Load(); w != nil && ca.set.now().Before(w.RotateAt) {
			return w, nil
		}
	} else {
		// Only identities that were never cached need validating.
		if _, err := NewIdentity(namespace, serviceAccount); err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		ca.mu.Lock()
		if s = ca.slots[id]; s == nil {
			s = &slot{}
			ca.slots[id] = s
		}
		ca.mu.Unlock()
	}
	return ca.refresh(id, s)
}

func (ca *CA) refresh(id Identity, s *slot) (*Workload, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.cur.Load()
	if old != nil && ca.set.now().Before(old.RotateAt) {
		return old, nil // issued by whoever held mu before us
	}
	w, err := ca.issue(id)
	if err != nil {
		return nil, err
	}
	s.cur.Store(w)
	if old != nil && s.replacedAt.Load() == nil {
		at := old.RotateAt
		s.replacedAt.Store(&at)
	}
	return w, nil
}

// NextRotation returns the earliest time at which RotateDue has something to
// do, which is in the past if a rotation is pending, or the zero time when
// nothing is cached.
func (ca *CA) NextRotation() time.Time {
	ca.mu.RLock()
	defer ca.mu.RUnlock()
	var next time.Time
	for _, s := range ca.slots {
		w := s.cur.Load()
		if w == nil {
			continue
		}
		t := w.RotateAt
		if r := s.replacedAt.Load(); r != nil && r.Before(t) {
			t = *r
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// RotateDue re-issues every cached certificate whose rotation point is at or
// before now and returns, sorted, the identities whose `default` secret must
// be pushed again: those, plus any that Get re-issued since the last call. A
// certificate that fails to re-issue is logged, kept, and retried on the next
// call.
func (ca *CA) RotateDue(now time.Time) []Identity {
	type candidate struct {
		id Identity
		s  *slot
	}
	var due []candidate
	ca.mu.RLock()
	for id, s := range ca.slots {
		w := s.cur.Load()
		if w != nil && (!now.Before(w.RotateAt) || s.replacedAt.Load() != nil) {
			due = append(due, candidate{id, s})
		}
	}
	ca.mu.RUnlock()

	var out []Identity
	for _, c := range due {
		if ca.rotate(c.id, c.s, now) {
			out = append(out, c.id)
		}
	}
	slices.SortFunc(out, func(a, b Identity) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.ServiceAccount, b.ServiceAccount))
	})
	return out
}

// rotate re-issues s's certificate if it is due at now and reports whether
// the identity needs a push.
func (ca *CA) rotate(id Identity, s *slot, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	replaced := s.replacedAt.Swap(nil) != nil
	w := s.cur.Load()
	if w == nil || now.Before(w.RotateAt) {
		return replaced
	}
	nw, err := ca.issue(id)
	if err != nil {
		ca.set.log.Error("workload certificate rotation failed; will retry", "identity", id.String(), "err", err)
		return replaced
	}
	s.cur.Store(nw)
	return true
}

// Forget drops the identity's cached certificate, for when its last proxy has
// gone, so that RotateDue stops renewing it. A later Get issues afresh.
func (ca *CA) Forget(namespace, serviceAccount string) {
	ca.mu.Lock()
	delete(ca.slots, Identity{Namespace: namespace, ServiceAccount: serviceAccount})
	ca.mu.Unlock()
}
