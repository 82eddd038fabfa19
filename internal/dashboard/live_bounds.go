package dashboard

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/meshperf/meshperf/internal/live"
)

// The live hub is bounded in bytes as well as in counts: whoever may POST
// decides how much an event carries, and a count cap alone let 40 events
// of 900 KiB (each under the body limit) keep 36 MB, and a GET of their
// session take the dashboard past 360 MB. Bytes are counted as the kept
// value encodes in JSON, which is what a GET or the stream writes out.
const (
	// maxLiveItemBytes bounds one event, or a session's opening, encoded.
	// A real event is about 300 bytes of figures, a mode and a label; the
	// largest is an error event whose message is a failed run's reason, a
	// few lines. 64 KiB is far above any of them and still small next to
	// a session's bound. Larger is refused (413).
	maxLiveItemBytes = 64 << 10
	// maxLiveSessionBytes bounds what one session keeps: its opening and
	// its events. maxLiveEvents real events take about 1 MiB, so for real
	// runs the count binds first; past either the oldest events go, as a
	// run's publisher goes on regardless and the page wants the latest.
	maxLiveSessionBytes = 2 << 20
	// maxLiveBytes bounds what every session keeps together. Past it the
	// oldest finished sessions are evicted; when only running ones remain,
	// new sessions and events are refused (503): evicting a running
	// session's events would let one publisher erase another's.
	maxLiveBytes = 32 << 20
	// maxLiveOwnMessage clips the messages the dashboard writes itself
	// (a lab run's exit reason with its last log line) so that its own
	// events always fit maxLiveItemBytes, escaping included.
	maxLiveOwnMessage = maxLiveItemBytes / 8
)

// encodedSize is how many bytes v takes in JSON, as a GET writes it.
func encodedSize(v any) int {
	data, _ := json.Marshal(v) // events and openings always encode
	return len(data)
}

// itemTooLarge refuses an event or an opening over maxLiveItemBytes.
func itemTooLarge(what string, size int) error {
	return requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
		"%s is %d bytes as JSON, over the %d a live session takes: an event carries figures and a short message", what, size, maxLiveItemBytes)}
}

// hubFull refuses what would take the sessions past maxLiveBytes.
func (h *liveHub) hubFull(growth int64) error {
	return requestError{http.StatusServiceUnavailable, fmt.Sprintf(
		"the live sessions keep %d bytes and this needs %d more, past the %d they keep in all: wait for a running session to end",
		h.bytes, growth, maxLiveBytes)}
}

// stamp is events as s would keep them (seq and time stamped) with their
// encoded sizes, without changing s; an event over maxLiveItemBytes is
// refused with all the others.
func (h *liveHub) stamp(s *liveSession, events []live.Event) ([]live.Event, []int, error) {
	stamped := make([]live.Event, len(events))
	sizes := make([]int, len(events))
	now := h.now()
	for i, e := range events {
		e.Seq = s.seq + int64(i) + 1
		if e.Time.IsZero() {
			e.Time = now
		}
		stamped[i], sizes[i] = e, encodedSize(e)
		if sizes[i] > maxLiveItemBytes {
			return nil, nil, itemTooLarge(fmt.Sprintf("event %d", i+1), sizes[i])
		}
	}
	return stamped, sizes, nil
}

// trimFor is how many of s's oldest events go when events of sizes are
// added (the new ones count too, after the kept ones), and their bytes:
// the session's count and byte bounds hold afterwards.
func (s *liveSession) trimFor(sizes []int) (drop int, dropBytes int64) {
	count := len(s.events) + len(sizes)
	bytes := s.eventBytes + sum(sizes)
	sizeAt := func(i int) int64 {
		if i < len(s.sizes) {
			return int64(s.sizes[i])
		}
		return int64(sizes[i-len(s.sizes)])
	}
	for drop < count && (count-drop > maxLiveEvents || s.openingBytes+bytes-dropBytes > maxLiveSessionBytes) {
		dropBytes += sizeAt(drop)
		drop++
	}
	return drop, dropBytes
}

// growth is how many bytes the hub keeps more once s has taken events of
// sizes (negative when more old ones go than new ones come).
func (s *liveSession) growth(sizes []int) int64 {
	_, dropped := s.trimFor(sizes)
	return sum(sizes) - dropped
}

func sum(sizes []int) (n int64) {
	for _, size := range sizes {
		n += int64(size)
	}
	return n
}

// makeRoom evicts the oldest finished sessions other than keep until
// growth more bytes fit maxLiveBytes, under h.mu; it evicts nothing and
// refuses when they would not fit even then.
func (h *liveHub) makeRoom(keep *liveSession, growth int64) error {
	if h.bytes+growth <= maxLiveBytes {
		return nil
	}
	freeable := int64(0)
	for _, s := range h.sessions {
		if s != keep && s.state != stateRunning {
			freeable += s.bytes()
		}
	}
	if h.bytes-freeable+growth > maxLiveBytes {
		return h.hubFull(growth)
	}
	for h.bytes+growth > maxLiveBytes {
		i := slices.IndexFunc(h.sessions, func(s *liveSession) bool { return s != keep && s.state != stateRunning })
		h.evict(i)
	}
	return nil
}

// evict forgets session i, under h.mu.
func (h *liveHub) evict(i int) {
	h.bytes -= h.sessions[i].bytes()
	h.sessions = slices.Delete(h.sessions, i, i+1)
}

// keep adds stamped events of sizes to s, dropping its oldest past its
// bounds, and counts the bytes, under h.mu.
func (h *liveHub) keep(s *liveSession, stamped []live.Event, sizes []int) {
	drop, dropBytes := s.trimFor(sizes)
	s.events = append(s.events, stamped...)
	s.sizes = append(s.sizes, sizes...)
	s.events = slices.Delete(s.events, 0, drop)
	s.sizes = slices.Delete(s.sizes, 0, drop)
	s.evicted += int64(drop)
	grown := sum(sizes) - dropBytes
	s.eventBytes += grown
	h.bytes += grown
}

// bytes is what s keeps, encoded: its opening and its events.
func (s *liveSession) bytes() int64 { return s.openingBytes + s.eventBytes }

// clipOwnMessage keeps a message the dashboard writes itself within
// maxLiveOwnMessage, on a rune boundary.
func clipOwnMessage(m string) string {
	if len(m) <= maxLiveOwnMessage {
		return m
	}
	cut := maxLiveOwnMessage
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return m[:cut] + "…"
}
