package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/meshperf/meshperf/internal/live"
)

// maxLiveBody bounds a POST's body: an event is a few hundred bytes, a
// batch of them a publisher's queue at most.
const maxLiveBody = 1 << 20

// sseKeepAlive is how often an idle stream sends a comment, so that
// proxies and browsers keep it open and a gone reader is noticed.
const sseKeepAlive = 15 * time.Second

// WithToken requires "Authorization: Bearer token" on every POST (the
// requests that publish or start runs); empty requires nothing.
func WithToken(token string) Option { return func(s *server) { s.guard.Token = token } }

// WithAllowedHosts names the Host names the dashboard answers besides IP
// addresses and localhost: the name in its listen address (host:port, as
// given) and hosts (--allowed-hosts; httpguard.AnyHost for any).
func WithAllowedHosts(listenAddress string, hosts []string) Option {
	return func(s *server) { s.guard.BindAddress, s.guard.AllowedHosts = listenAddress, hosts }
}

// WithLabRunner lets POST /api/live/start start shipped scenarios through
// lr; without it the dashboard starts nothing.
func WithLabRunner(lr *LabRunner) Option { return func(s *server) { s.labs = lr } }

// servePost answers a POST (which the guard let through: its Host,
// origin, content type and token checked): no query parameters, and
// handle's status and value as JSON.
func servePost(handle func(*server, *http.Request) (int, any, error)) func(*server) http.Handler {
	return func(s *server) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := checkParams(r, nil); err != nil {
				s.writeHandlerError(w, r, err)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, maxLiveBody)
			status, value, err := handle(s, r)
			if err != nil {
				s.writeHandlerError(w, r, err)
				return
			}
			body, err := encodeJSON(value)
			if err != nil {
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			w.Header().Set("Content-Type", jsonType)
			w.WriteHeader(status)
			_, _ = w.Write(body)
		})
	}
}

// decodeBody reads one JSON value into v, refusing unknown fields (a
// misspelt one would otherwise vanish) and anything after the value.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
			return badRequest("body over %d bytes", mbe.Limit)
		}
		return badRequest("body is not the JSON wanted: %v", err)
	}
	if dec.More() {
		return badRequest("body has more than one JSON value")
	}
	return nil
}

func (s *server) liveOpen(r *http.Request) (int, any, error) {
	var o live.Opening
	if err := decodeBody(r, &o); err != nil {
		return 0, nil, err
	}
	if err := o.Check(); err != nil {
		return 0, nil, badRequest("%v", err)
	}
	id, err := s.live.open(o)
	if errors.Is(err, errHubFull) {
		return 0, nil, requestError{http.StatusServiceUnavailable, err.Error()}
	}
	return http.StatusCreated, map[string]string{"id": id}, err
}

func (s *server) livePublish(r *http.Request) (int, any, error) {
	body, err := io.ReadAll(r.Body)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return 0, nil, badRequest("body over %d bytes", mbe.Limit)
	} else if err != nil {
		return 0, nil, badRequest("read body: %v", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	var events []live.Event
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		err = decodeBody(r, &events)
	} else {
		var e live.Event
		err = decodeBody(r, &e)
		events = []live.Event{e}
	}
	if err != nil {
		return 0, nil, err
	}
	if len(events) == 0 {
		return 0, nil, badRequest("no events in the body")
	}
	for i, e := range events {
		if err := e.Check(); err != nil {
			return 0, nil, badRequest("event %d: %v", i+1, err)
		}
	}
	seq, err := s.live.publish(r.PathValue("id"), events)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, map[string]int64{"accepted": int64(len(events)), "last_seq": seq}, nil
}

func (s *server) liveSessions(*http.Request) (response, error) {
	return response{value: s.live.list()}, nil
}

// liveStream serves a session as server-sent events: those after
// Last-Event-ID (all of them without it), then each new one as it comes,
// until the session ends or the reader goes. Each event's id is its seq.
func (s *server) liveStream() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		for name := range r.URL.Query() {
			writeError(w, http.StatusBadRequest, unknownParam(name, nil))
			return
		}
		var after int64
		if h := r.Header.Get("Last-Event-ID"); h != "" {
			n, err := strconv.ParseInt(h, 10, 64)
			if err != nil || n < 0 {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("Last-Event-ID %q: want an event's seq, a whole number", h))
				return
			}
			after = n
		}
		events, changed, ended, ok := s.live.since(id, after)
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no live session %q", id))
			return
		}
		flusher, _ := w.(http.Flusher)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		keepAlive := time.NewTicker(sseKeepAlive)
		defer keepAlive.Stop()
		for {
			for _, e := range events {
				data, _ := json.Marshal(e) // an Event always encodes
				if _, err := fmt.Fprintf(w, "id: %d\ndata: %s\n\n", e.Seq, data); err != nil {
					return
				}
				after = e.Seq
			}
			if flusher != nil {
				flusher.Flush()
			}
			if ended {
				return
			}
			select {
			case <-changed:
			case <-keepAlive.C:
				if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
					return
				}
			case <-r.Context().Done():
				return
			}
			if events, changed, ended, ok = s.live.since(id, after); !ok {
				return // evicted while followed
			}
		}
	})
}
