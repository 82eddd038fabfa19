package dashboard

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/live"
)

// The live sessions are kept in memory, within these bounds: a dashboard
// that runs for months must not grow with every run it has watched.
const (
	// maxLiveSessions is how many sessions are kept; a new one evicts the
	// oldest finished one, and is refused while all of them run.
	maxLiveSessions = 32
	// maxLiveEvents is how many events a session keeps (an hour of a
	// load's progress at one a second); beyond it the oldest go. Bytes
	// are bounded too (live_bounds.go).
	maxLiveEvents = 3600
	// liveStaleAfter fails a running session that has sent nothing for
	// this long: its publisher died without saying so.
	liveStaleAfter = 5 * time.Minute
)

// The states of a session.
const (
	stateRunning = "running"
	stateDone    = "done"
	stateFailed  = "failed"
)

// liveSession is one run's progress as published.
type liveSession struct {
	live.Opening
	id      string
	started time.Time
	state   string
	events  []live.Event  // the last maxLiveEvents, oldest first
	sizes   []int         // each kept event's bytes as JSON, as events
	evicted int64         // events dropped for the bounds
	seq     int64         // the last event's seq
	lastAt  time.Time     // when the last event arrived
	changed chan struct{} // closed and replaced on each change, to wake streams
	// openingBytes and eventBytes are what the opening and the kept
	// events take as JSON (live_bounds.go).
	openingBytes, eventBytes int64
}

// liveHub holds the sessions; its methods are safe for concurrent use.
type liveHub struct {
	mu       sync.Mutex
	sessions []*liveSession // oldest first
	bytes    int64          // what every session keeps, as JSON
	now      func() time.Time
}

func newLiveHub() *liveHub { return &liveHub{now: time.Now} }

var errHubFull = errors.New("every live session is running: wait for one to end")

// open adds a session and returns its id.
func (h *liveHub) open(o live.Opening) (string, error) {
	size := int64(encodedSize(o))
	if size > maxLiveItemBytes {
		return "", itemTooLarge("the opening", int(size))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire()
	if len(h.sessions) >= maxLiveSessions {
		i := slices.IndexFunc(h.sessions, func(s *liveSession) bool { return s.state != stateRunning })
		if i < 0 {
			return "", errHubFull
		}
		h.evict(i)
	}
	if err := h.makeRoom(nil, size); err != nil {
		return "", err
	}
	id := newSessionID()
	now := h.now()
	h.sessions = append(h.sessions, &liveSession{Opening: o, id: id, started: now, lastAt: now,
		state: stateRunning, changed: make(chan struct{}), openingBytes: size})
	h.bytes += size
	return id, nil
}

func newSessionID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand's documented promise)
	return hex.EncodeToString(b)
}

func (h *liveHub) find(id string) *liveSession {
	for _, s := range h.sessions {
		if s.id == id {
			return s
		}
	}
	return nil
}

// publish appends events to a session, all or none: an event after the
// session's end is refused, with the events before it, and so are events
// past the hub's byte bounds.
func (h *liveHub) publish(id string, events []live.Event) (int64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire()
	s := h.find(id)
	if s == nil {
		return 0, notFound("no live session %q", id)
	}
	ended := s.state != stateRunning
	for _, e := range events[:len(events)-1] {
		ended = ended || e.Ends()
	}
	if ended {
		return 0, requestError{http.StatusConflict, fmt.Sprintf("live session %s has ended: it takes no more events", id)}
	}
	stamped, sizes, err := h.stamp(s, events)
	if err != nil {
		return 0, err
	}
	if err := h.makeRoom(s, s.growth(sizes)); err != nil {
		return 0, err
	}
	h.append(s, stamped, sizes)
	return s.seq, nil
}

// append adds stamped events to s and wakes its streams, under h.mu.
func (h *liveHub) append(s *liveSession, stamped []live.Event, sizes []int) {
	h.keep(s, stamped, sizes)
	s.seq = stamped[len(stamped)-1].Seq
	s.lastAt = h.now()
	for _, e := range stamped {
		switch e.Kind {
		case live.KindEnd:
			s.state = stateDone
		case live.KindError:
			s.state = stateFailed
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// fail ends a running session with an error event, e.g. when the run the
// dashboard started exited without saying why.
func (h *liveHub) fail(id, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.find(id); s != nil && s.state == stateRunning {
		h.end(s, message)
	}
}

// expire fails the running sessions that went quiet, under h.mu.
func (h *liveHub) expire() {
	now := h.now()
	for _, s := range h.sessions {
		if s.state == stateRunning && now.Sub(s.lastAt) > liveStaleAfter {
			h.end(s, fmt.Sprintf("no event for %s: the run stopped publishing", liveStaleAfter))
		}
	}
}

// end fails s with the dashboard's own error event, under h.mu. It is
// kept even when the hub is full (after evicting what finished sessions
// it can): a session must not stay running for want of room to say it
// failed, and there is at most one such event, clipped, per session.
func (h *liveHub) end(s *liveSession, message string) {
	stamped, sizes, err := h.stamp(s, []live.Event{{Kind: live.KindError, Message: clipOwnMessage(message)}})
	if err != nil { // cannot happen with the clip; the state still changes
		stamped, sizes, _ = h.stamp(s, []live.Event{{Kind: live.KindError}})
	}
	_ = h.makeRoom(s, s.growth(sizes))
	h.append(s, stamped, sizes)
}

// liveSessionView is a session as the API shows it.
type liveSessionView struct {
	ID       string    `json:"id"`
	Source   string    `json:"source"`
	Scenario string    `json:"scenario"`
	Target   string    `json:"target"`
	Label    string    `json:"label"`
	Started  time.Time `json:"started"`
	State    string    `json:"state"`
	// Run is the lab's latest run event: which run of the matrix is going.
	Run       *live.Event `json:"run,omitempty"`
	LastEvent *live.Event `json:"last_event"`
	// EventsEvicted counts the oldest events dropped for the bounds.
	EventsEvicted int64 `json:"events_evicted"`
	// KeptBytes is what the dashboard keeps of the session: its opening
	// and events as JSON, the figure its memory bounds count.
	KeptBytes int64 `json:"kept_bytes"`
}

// liveSessionDetail is a session with its events.
type liveSessionDetail struct {
	liveSessionView
	Events []live.Event `json:"events"`
}

func (s *liveSession) view() liveSessionView {
	v := liveSessionView{ID: s.id, Source: s.Source, Scenario: s.Scenario, Target: s.Target, Label: s.Label,
		Started: s.started, State: s.state, EventsEvicted: s.evicted, KeptBytes: s.bytes()}
	if n := len(s.events); n > 0 {
		last := s.events[n-1]
		v.LastEvent = &last
	}
	for i := len(s.events) - 1; i >= 0; i-- {
		if s.events[i].Kind == live.KindRun {
			run := s.events[i]
			v.Run = &run
			break
		}
	}
	return v
}

// list is every session, running first, then newest first.
func (h *liveHub) list() []liveSessionView {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire()
	out := make([]liveSessionView, 0, len(h.sessions))
	for i := len(h.sessions) - 1; i >= 0; i-- {
		out = append(out, h.sessions[i].view())
	}
	slices.SortStableFunc(out, func(a, b liveSessionView) int {
		return boolOrder(b.State == stateRunning) - boolOrder(a.State == stateRunning)
	})
	return out
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// get is one session with its events.
func (h *liveHub) get(id string) (liveSessionDetail, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire()
	s := h.find(id)
	if s == nil {
		return liveSessionDetail{}, false
	}
	return liveSessionDetail{s.view(), orEmpty(slices.Clone(s.events))}, true
}

// since returns the session's events after seq, a channel closed at its
// next change, and whether it has ended; ok is false for no such session.
func (h *liveHub) since(id string, seq int64) (events []live.Event, changed <-chan struct{}, ended, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.expire()
	s := h.find(id)
	if s == nil {
		return nil, nil, false, false
	}
	i, _ := slices.BinarySearchFunc(s.events, seq, func(e live.Event, seq int64) int {
		return int(e.Seq - seq)
	})
	for i < len(s.events) && s.events[i].Seq <= seq {
		i++
	}
	return slices.Clone(s.events[i:]), s.changed, s.state != stateRunning, true
}
