package dashboard

import (
	"bytes"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/live"
)

// A session written an event at a time reads exactly as the API's
// encoding of the whole value, with no events, one, or several (HTML
// characters escaped alike).
func TestSessionJSONWrittenByEventIsTheAPIsJSON(t *testing.T) {
	at := time.Date(2026, 11, 27, 13, 40, 2, 0, time.UTC)
	view := liveSessionView{ID: "5f0c8e2a91b4", Source: "lab", Scenario: "quick", Started: at, State: "running",
		LastEvent: &live.Event{Seq: 2, Kind: live.KindProgress}, KeptBytes: 321}
	events := []live.Event{
		{Seq: 1, Kind: live.KindStart, Time: at, Message: "<quick> & 4 runs"},
		{Seq: 2, Kind: live.KindProgress, Time: at, QPS: 99.5, Calls: 100, Mode: "both-sidecars"},
		{Seq: 3, Kind: live.KindError, Time: at, Message: "line\nbreak \"quoted\""},
	}
	for _, n := range []int{0, 1, len(events)} {
		d := liveSessionDetail{view, orEmpty(events[:n:n])}
		want, err := encodeJSON(d)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := writeSessionJSON(&got, d); err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			t.Errorf("%d events written one at a time:\n%s\nwant encodeJSON's\n%s", n, got.String(), want)
		}
	}
}
