// Package dashboard serves the results store over HTTP for `meshperf
// dashboard`: browser pages (pages.go, web/) and a read-only JSON API
// under /api/ (runs, a run's records and CSV, compare's report, history's
// analysis, control-plane runs) for scripts and other UIs. The pages are
// built on the API's functions. It answers from the
// store through the packages that already own each question (results,
// compare, history) and adds only the JSON forms and the HTTP status codes.
//
// Every route is behind internal/httpguard: a web page the user visits must
// neither start a lab run (as root) nor, through a rebound name, read the
// store. Hosts are checked on every request; POSTs need JSON, a same-origin
// or non-browser caller, and the token when the dashboard has one.
package dashboard

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/httpguard"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/results"
)

// server answers the API from one store.
type server struct {
	store *results.Store
	log   *slog.Logger
	// dataDir is the directory of Fortio result files the /fortio pages
	// list and draw (Fortio's -data-dir); "" when none was given.
	dataDir string
	live    *liveHub          // the live sessions, in memory
	guard   httpguard.Options // what every request is checked against
	labs    *LabRunner        // starts lab runs; nil starts none
}

// Option sets up the dashboard beyond its store.
type Option func(*server)

// WithDataDir has the dashboard list and draw the Fortio JSON result files
// in dir (Fortio's, meshperf load's, Nighthawk's fortio output), read
// afresh on each request, as `fortio report -data-dir` does.
func WithDataDir(dir string) Option {
	return func(s *server) { s.dataDir = dir }
}

// endpoint is one route of the API: the index at /api/ lists them, so what is
// served and what is listed cannot differ.
type endpoint struct {
	pattern string   // net/http's ServeMux pattern
	params  []string // the query parameters it accepts; any other is refused
	about   string
	handle  func(s *server, r *http.Request) (response, error)
	// handler, when set, serves the route instead of handle: requests
	// that are not a GET answered with one JSON value (POSTs, streams).
	handler func(s *server) http.Handler
}

var endpoints = []endpoint{
	{pattern: "GET /api/scenarios", about: "the scenarios the store holds, with their invocation and run counts",
		handle: (*server).scenarios},
	{pattern: "GET /api/runs", params: invocationFilters,
		about:  "the invocations (run ids) matching, newest first, with their modes, run counts, labels and provenance",
		handle: (*server).invocations},
	{pattern: "GET /api/runs/{id}", about: "every run of an invocation, and a capacity sweep's analysis (sweep) when the invocation was one",
		handle: (*server).invocation},
	{pattern: "GET /api/runs/{id}/csv", about: "an invocation's runs as Istio's benchmark CSV (text/csv)",
		handle: (*server).invocationCSV},
	{pattern: "GET /api/runs/{id}/fortio/{result}",
		about:  "one run of an invocation as a Fortio JSON result, rebuilt from the store (result: the run's name, as the run page links it)",
		handle: (*server).runFortioJSON},
	{pattern: "GET /api/compare", params: []string{"a", "b", "threshold", "confidence"},
		about:  "meshperf compare's report of B against A (run ids or labels), as compare -json writes it",
		handle: (*server).compare},
	{pattern: "GET /api/history", params: []string{"scenario", "metric", "mode", "qps", "conn", "by", "machine"},
		about:  "a scenario's figure across invocations and its change points, as history -json writes it",
		handle: (*server).history},
	{pattern: "GET /api/cpruns", about: "the stored control-plane load tests (meshperf cpload), oldest first",
		handle: (*server).controlPlaneRuns},
	{pattern: "GET /api/cpruns/{label}", params: []string{"start"},
		about:  "one control-plane load test with every stored figure and its report (the newest of a label stored more than once, unless start picks one)",
		handle: (*server).controlPlaneRun},
	{pattern: "GET /api/fortio", about: "the Fortio JSON result files in the data directory (-data-dir), with their figures or why they do not read",
		handle: (*server).fortioFiles},
	{pattern: "GET /api/fortio/{file}", about: "a result file of the data directory, as it is",
		handle: (*server).fortioFile},
	{pattern: "GET /api/live", about: "the live sessions (runs publishing their progress), running first",
		handle: (*server).liveSessions},
	{pattern: "POST /api/live", about: "open a live session: {\"source\": \"load\"|\"lab\", \"scenario\", \"target\", \"label\"}; answers 201 {\"id\"}",
		handler: servePost((*server).liveOpen)},
	{pattern: "POST /api/live/start", about: "start `meshperf lab run` of a shipped scenario here: {\"scenario\": NAME}; answers 201 {\"id\"} of its live session",
		handler: servePost((*server).liveStart)},
	{pattern: "GET /api/live/{id}", about: "a live session with its events",
		handler: (*server).liveSessionJSON},
	{pattern: "POST /api/live/{id}/events", about: "publish one event (or an array) to a live session",
		handler: servePost((*server).livePublish)},
	{pattern: "GET /api/live/{id}/stream", about: "a live session's events as server-sent events: replayed, then followed until it ends (Last-Event-ID resumes)",
		handler: (*server).liveStream},
	{pattern: "GET /live/{id}/chart.svg", about: "a live session's rate and P99 over time (SVG)",
		handler: (*server).liveChart},
}

// New returns the API's handler over st, which the caller keeps open
// while the handler serves. log gets the requests that failed on the
// server's side (a store that cannot be read); nil discards them. The
// options set the Fortio data directory, and the token and the lab runner
// of the live endpoints.
func New(st *results.Store, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &server{store: st, log: log, live: newLiveHub()}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	for _, e := range endpoints {
		if e.handler != nil {
			mux.Handle(e.pattern, e.handler(s))
			continue
		}
		mux.Handle(e.pattern, s.serve(e))
	}
	mux.Handle("GET /api/{$}", s.serve(endpoint{handle: (*server).index}))
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no such endpoint %s %s: GET /api/ lists them", r.Method, r.URL.Path))
	})
	for _, p := range pageRoutes {
		mux.Handle(p.pattern, s.servePage(p))
	}
	mux.Handle("GET /static/", staticFiles())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeErrorPage(w, http.StatusNotFound, fmt.Sprintf("no such page %s %s", r.Method, r.URL.Path))
	})
	s.guard.TokenHelp = "meshperf dashboard's -token, or the one it printed at start; meshperf load and lab run send it with --dashboard-token or $" + live.TokenEnv
	return s.withLog(httpguard.Wrap(mux, s.guard))
}

// response is what a handler answers: a value written as indented JSON,
// or, with contentType set, body as it is.
type response struct {
	value       any
	contentType string
	body        []byte
}

// requestError is an answer other than 200 with its one-line message:
// 400 for a malformed request, 404 for something the store does not hold.
type requestError struct {
	status int
	msg    string
}

func (e requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return requestError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) error {
	return requestError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

// serve runs e's handler after refusing query parameters it does not
// take (checkParams).
func (s *server) serve(e endpoint) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var resp response
		err := checkParams(r, e.params)
		if err == nil {
			resp, err = e.handle(s, r)
		}
		if err != nil {
			s.writeHandlerError(w, r, err)
			return
		}
		body, contentType := resp.body, resp.contentType
		if contentType == "" {
			if body, err = encodeJSON(resp.value); err != nil {
				s.log.Error("encode response", "path", r.URL.Path, "error", err)
				writeError(w, http.StatusInternalServerError, err.Error())
				return
			}
			contentType = jsonType
		}
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	})
}

// writeHandlerError answers a handler's error: its status and message
// for a requestError, else 500 (logged: the server's fault, not the
// request's).
func (s *server) writeHandlerError(w http.ResponseWriter, r *http.Request, err error) {
	status, msg := s.failure(r, err)
	writeError(w, status, msg)
}

// failure is the status and message that answer a handler's error, for
// the API's JSON and the pages alike: a requestError's own, else 500,
// logged (the server's fault, not the request's).
func (s *server) failure(r *http.Request, err error) (status int, msg string) {
	if re := (requestError{}); errors.As(err, &re) {
		return re.status, re.msg
	}
	s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	return http.StatusInternalServerError, err.Error()
}

// checkParams refuses query parameters a route does not take: a misspelt
// filter would otherwise silently match everything.
func checkParams(r *http.Request, known []string) error {
	for name := range r.URL.Query() {
		if !slices.Contains(known, name) {
			return badRequest("%s", unknownParam(name, known))
		}
	}
	return nil
}

func unknownParam(name string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("unknown query parameter %q: this endpoint takes none", name)
	}
	return fmt.Sprintf("unknown query parameter %q: want one of %s", name, strings.Join(known, ", "))
}

// withLog logs each request at debug level: quiet by default.
func (s *server) withLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.log.Debug("request", "method", r.Method, "url", r.URL.String())
		next.ServeHTTP(w, r)
	})
}

const jsonType = "application/json"

// encodeJSON is the API's JSON: indented, for people reading it with curl.
func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode JSON: %w", err)
	}
	return b.Bytes(), nil
}

// writeError answers {"error": msg} with status.
func writeError(w http.ResponseWriter, status int, msg string) {
	body, _ := encodeJSON(map[string]string{"error": msg}) // a string always encodes
	w.Header().Set("Content-Type", jsonType)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// indexEntry is one endpoint as GET /api/ lists it.
type indexEntry struct {
	Method string   `json:"method"`
	Path   string   `json:"path"`
	Params []string `json:"params"`
	About  string   `json:"about"`
}

func (s *server) index(*http.Request) (response, error) {
	out := make([]indexEntry, 0, len(endpoints))
	for _, e := range endpoints {
		method, path, _ := strings.Cut(e.pattern, " ")
		out = append(out, indexEntry{Method: method, Path: path, Params: orEmpty(e.params), About: e.about})
	}
	return response{value: map[string]any{"endpoints": out}}, nil
}

// orEmpty makes a nil list [] in JSON, so that readers need not tell
// null from empty.
func orEmpty[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
