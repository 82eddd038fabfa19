package dashboard

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// liveSessionJSON serves GET /api/live/{id}: the session with its events
// in the API's indented JSON, written an event at a time. Encoded whole,
// a session at its bound (maxLiveSessionBytes) went through a compact
// and an indented copy in growing buffers before the first byte left,
// several times its size per request and per concurrent reader.
func (s *server) liveSessionJSON() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkParams(r, nil); err != nil {
			s.writeHandlerError(w, r, err)
			return
		}
		v, ok := s.live.get(r.PathValue("id"))
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("no live session %q", r.PathValue("id")))
			return
		}
		w.Header().Set("Content-Type", jsonType)
		_ = writeSessionJSON(w, v) // a reader that went away is no error of ours
	})
}

// writeSessionJSON writes d as encodeJSON would (the same fields, order
// and indentation), its events one at a time.
func writeSessionJSON(w io.Writer, d liveSessionDetail) error {
	head, err := json.MarshalIndent(d.liveSessionView, "", "  ")
	if err != nil {
		return fmt.Errorf("encode live session: %w", err)
	}
	// head ends "\n}": the events go before that brace.
	head = append(head[:len(head)-2], ",\n  \"events\": ["...)
	if _, err := w.Write(head); err != nil {
		return err
	}
	for i, e := range d.Events {
		b, err := json.MarshalIndent(e, "    ", "  ")
		if err != nil {
			return fmt.Errorf("encode live event: %w", err)
		}
		sep := ",\n    "
		if i == 0 {
			sep = "\n    "
		}
		if _, err := io.WriteString(w, sep); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	tail := "]\n}\n"
	if len(d.Events) > 0 {
		tail = "\n  ]\n}\n"
	}
	_, err = io.WriteString(w, tail)
	return err
}
