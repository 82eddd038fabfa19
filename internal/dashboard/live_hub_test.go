package dashboard

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/live"
)

// The dashboard's own closing event (a lab run's exit reason with its last
// log line, which can be any length) always fails the session, clipped to
// fit the event bound, and is counted like any other.
func TestHubFailsASessionWithALongReasonClipped(t *testing.T) {
	h := newLiveHub()
	opening := live.Opening{Source: live.SourceLab, Scenario: "quick"}
	id, err := h.open(opening)
	if err != nil {
		t.Fatal(err)
	}
	h.fail(id, "lab run: exit status 1: "+strings.Repeat("\x01é", 100<<10))
	d, _ := h.get(id)
	if d.State != stateFailed || len(d.Events) != 1 {
		t.Fatalf("after fail: %s with %d events, want failed with its error event", d.State, len(d.Events))
	}
	msg := d.Events[0].Message
	if !strings.HasPrefix(msg, "lab run: exit status 1: ") || len(msg) > maxLiveOwnMessage+len("…") || !strings.HasSuffix(msg, "…") {
		t.Errorf("message of %d bytes, want the reason clipped to %d and marked so", len(msg), maxLiveOwnMessage)
	}
	if size := encodedSize(d.Events[0]); size > maxLiveItemBytes || d.KeptBytes != h.bytes || h.bytes != int64(size+encodedSize(opening)) {
		t.Errorf("event of %d bytes as JSON, session keeps %d, hub %d; want within %d and counted", size, d.KeptBytes, h.bytes, maxLiveItemBytes)
	}
}
