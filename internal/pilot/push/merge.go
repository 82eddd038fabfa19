package push

import (
	"maps"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// mergedRequest accumulates push requests with model.Merge's rules while
// copying at most once. The first request is kept as is (requests are shared,
// e.g. one per push across every proxy, and must not be modified); the first
// merge makes a private copy; later merges fold into that copy in place.
// model.Merge alone copies the growing set on every call, which makes a window
// that absorbs n changes cost O(n²).
type mergedRequest struct {
	req   *model.PushRequest
	owned bool
}

func (m *mergedRequest) add(r *model.PushRequest) {
	switch {
	case r == nil:
	case m.req == nil:
		m.req = r
	case !m.owned:
		m.req = m.req.Merge(r)
		m.owned = true
	default:
		mergeInto(m.req, r)
	}
}

// addShared is add for a request merged into many connections' pushes at
// once: the union of a shared request and r is the same for every
// connection holding that shared request, so it is made once (unions maps
// the shared request to it) and stays shared. Without it a push that
// reaches 20,000 connections still waiting for a connect storm's push
// copied that push's thousands of configs 20,000 times. A nil unions is add.
func (m *mergedRequest) addShared(r *model.PushRequest, unions map[*model.PushRequest]*model.PushRequest) {
	if unions == nil || r == nil || m.req == nil || m.owned {
		m.add(r)
		return
	}
	u, ok := unions[m.req]
	if !ok {
		u = m.req.Merge(r)
		unions[m.req] = u
	}
	m.req = u
}

// mergeInto is model.Merge done in place on a dst the caller owns.
func mergeInto(dst, src *model.PushRequest) {
	dst.Full = dst.Full || src.Full
	if len(src.ConfigsUpdated) > 0 {
		if dst.ConfigsUpdated == nil {
			dst.ConfigsUpdated = maps.Clone(src.ConfigsUpdated)
		} else {
			maps.Copy(dst.ConfigsUpdated, src.ConfigsUpdated)
		}
	}
	if len(src.Reason) > 0 && dst.Reason == nil {
		dst.Reason = make(map[model.TriggerReason]int, len(src.Reason))
	}
	for reason, n := range src.Reason {
		dst.Reason[reason] += n
	}
	if dst.Start.IsZero() || (!src.Start.IsZero() && src.Start.Before(dst.Start)) {
		dst.Start = src.Start
	}
}
