package push

import (
	"maps"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/model"
)

// TestMergedRequestAgreesWithModelMerge checks the in-place fold against
// model.Merge, the rules' single source of truth, over a mixed sequence.
func TestMergedRequestAgreesWithModelMerge(t *testing.T) {
	t0 := time.Unix(500, 0)
	seq := []*model.PushRequest{
		model.NewPushRequest(model.ReasonEndpoint, false, t0, key("a")),
		{Reason: map[model.TriggerReason]int{}},                     // nothing at all
		model.NewPushRequest(model.ReasonConfig, true, time.Time{}), // no start, no configs
		model.NewPushRequest(model.ReasonEndpoint, false, t0.Add(-time.Second), key("a"), key("b")),
		model.NewPushRequest(model.ReasonSecret, false, t0.Add(time.Second), key("c")),
		nil,
	}
	for first := range seq {
		var want *model.PushRequest
		var got mergedRequest
		for _, r := range seq[first:] {
			want = want.Merge(r)
			got.add(r)
		}
		if want == nil {
			continue
		}
		g := got.req
		if g.Full != want.Full || !g.Start.Equal(want.Start) || !maps.Equal(g.ConfigsUpdated, want.ConfigsUpdated) || !sameReasons(g.Reason, want.Reason) {
			t.Errorf("from %d: folded %+v, model.Merge %+v", first, g, want)
		}
	}
	if seq[0].Reasons() != 1 || len(seq[0].ConfigsUpdated) != 1 || seq[0].Full {
		t.Errorf("folding modified an input: %+v", seq[0])
	}
}

func sameReasons(a, b map[model.TriggerReason]int) bool {
	for r, n := range a {
		if b[r] != n {
			return false
		}
	}
	for r, n := range b {
		if a[r] != n {
			return false
		}
	}
	return true
}
