// Package api is the control plane's local HTTP API: the endpoints that
// `meshperf apply`, `delete` and `get` talk to, the debug endpoints operators
// compare with istiod's (/debug/config_dump, /debug/syncz, /debug/push_status),
// and /ready for scripts that wait for the server.
//
// It holds no state of its own. Config is read from and written to the store
// it is given, and the debug endpoints call back into the xDS server, so the
// package sits beside the pipeline rather than in it and can be served on any
// listener main chooses. Every answer is JSON, errors included, so that a
// client never has to guess whether a body is a message or a payload.
//
// A web page must not rewrite the mesh's config nor read it: the handler
// is wrapped in internal/httpguard (the Host allow-list on every request;
// JSON or YAML, cross-origin checks and, when the server has one, the
// token on writes; the token on /debug/). Every body is capped at
// MaxBodyBytes, and every error quotes at most a prefix of what the client
// sent, so no client makes an answer, or the server, grow with its input.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	adminv3 "github.com/envoyproxy/go-control-plane/envoy/admin/v3"

	"github.com/meshperf/meshperf/internal/excerpt"
	"github.com/meshperf/meshperf/internal/httpguard"
	"github.com/meshperf/meshperf/internal/pilot/store"
)

// TokenEnv names the variable that holds the API's token, for `meshperf
// pilot` (when --api-token is not given) and its clients alike.
const TokenEnv = "MESHPERF_PILOT_TOKEN"

// MaxBodyBytes caps a request body. It is far above any mesh's config (1000
// services with their routing rules are a few MiB of YAML) and low enough
// that a mistaken upload of a large file cannot make the control plane
// allocate without bound.
const MaxBodyBytes = 16 << 20

// ErrUnknownProxy is what Deps.ConfigDump wraps when no proxy has the ID.
var ErrUnknownProxy = errors.New("unknown proxy")

// Deps is what the handler serves from.
type Deps struct {
	// Store is the config the resources endpoints read.
	Store store.Reader
	// Writer takes apply and delete. It is nil when config comes from
	// --configDir, and then writes answer 409 Conflict with the message of
	// store.ReadOnlyError. A Writer whose writes fail with an error matching
	// store.ErrReadOnly (store.Dir) is answered the same way.
	Writer store.Writer
	// ConfigDir is the --configDir directory, named in the 409 message when
	// Writer is nil.
	ConfigDir string
	// ConfigDump returns a proxy's current configuration as Envoy's admin
	// ConfigDump, or an error wrapping ErrUnknownProxy.
	ConfigDump func(proxyID string) (*adminv3.ConfigDump, error)
	// Syncz lists every connection's per-type sync state.
	Syncz func() []ProxySync
	// PushStatus describes the last pushes (any JSON-encodable value).
	PushStatus func() any
	// PushTrace lists recent pushes' stage timestamps (any JSON-encodable
	// value).
	PushTrace func() any
	// Tokens issues pods' tokens (POST /api/v1/tokens); nil on Kubernetes,
	// where the kubelet projects them, and the endpoint answers 409.
	Tokens TokenIssuer
	// Logger gets one record per write and per server-side failure; nil
	// discards them.
	Logger *slog.Logger

	// Token, when set, is required (Authorization: Bearer) on every write
	// and on /debug/.
	Token string
	// ListenAddress is the API's address as given (--httpAddr): its host,
	// when a name, is accepted in Host.
	ListenAddress string
	// AllowedHosts are further names accepted in Host (--allowed-hosts,
	// the pilot's Service names on Kubernetes); httpguard.AnyHost accepts
	// any.
	AllowedHosts []string
}

// ProxySync is one ADS connection's sync state, as /debug/syncz shows it.
type ProxySync struct {
	ProxyID      string     `json:"proxyID"`
	ConnectionID string     `json:"connectionID"`
	ConnectedAt  time.Time  `json:"connectedAt"`
	Types        []TypeSync `json:"types"`
}

// TypeSync is what was sent and acknowledged of one xDS type on a connection.
type TypeSync struct {
	Type         string `json:"type"` // cds, eds, lds, rds, sds
	VersionSent  string `json:"versionSent"`
	NonceSent    string `json:"nonceSent"`
	VersionAcked string `json:"versionAcked"`
	NonceAcked   string `json:"nonceAcked"`
	Synced       bool   `json:"synced"`
	Nacks        int    `json:"nacks"`
	LastError    string `json:"lastError,omitempty"`
}

// ErrorResponse is the body of every answer that is not a 2xx.
type ErrorResponse struct {
	Error string `json:"error"`
}

type handler struct {
	d   Deps
	log *slog.Logger
}

// NewHandler returns the API and debug endpoints:
//
//	POST /api/v1/apply                    create or update the objects in the body, atomically
//	POST /api/v1/delete                   delete the objects named in the body, atomically
//	POST /api/v1/tokens                   a pod's token, proving its identity to the CA and xDS
//	GET  /api/v1/resources/{kind}         list a kind (?namespace=NS, empty for all)
//	GET  /api/v1/resources/{kind}/{name}  one object (?namespace=NS, default "default")
//	GET  /debug/config_dump?proxyID=ID    a proxy's config as Envoy's config dump
//	GET  /debug/syncz                     each connection's sent and acknowledged versions
//	GET  /debug/push_status               the last pushes
//	GET  /debug/push_trace                recent pushes' stage timestamps
//	GET  /ready                           "ok" once the server answers
//
// behind the guard that Deps' Token, ListenAddress and AllowedHosts set up.
func NewHandler(d Deps) http.Handler {
	h := &handler{d: d, log: d.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	// Patterns carry no method so that a wrong method reaches the handler
	// and is answered in JSON like every other error; the mux's own 405 and
	// 404 are plain text.
	mux.HandleFunc("/api/v1/apply", h.only(http.MethodPost, h.apply))
	mux.HandleFunc("/api/v1/delete", h.only(http.MethodPost, h.delete))
	mux.HandleFunc("/api/v1/tokens", h.only(http.MethodPost, h.issueToken))
	mux.HandleFunc("/api/v1/resources/{kind}", h.only(http.MethodGet, h.list))
	mux.HandleFunc("/api/v1/resources/{kind}/{name}", h.only(http.MethodGet, h.get))
	mux.HandleFunc("/debug/config_dump", h.only(http.MethodGet, h.configDump))
	mux.HandleFunc("/debug/syncz", h.only(http.MethodGet, h.syncz))
	mux.HandleFunc("/debug/push_status", h.only(http.MethodGet, h.pushStatus))
	mux.HandleFunc("/debug/push_trace", h.only(http.MethodGet, h.pushTrace))
	mux.HandleFunc("/ready", h.only(http.MethodGet, ready))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no endpoint "+excerpt.String(r.URL.Path)+
			": see /api/v1/resources/{kind}, /api/v1/apply, /api/v1/delete, /debug/config_dump, /debug/syncz, /debug/push_status, /ready")
	})
	return httpguard.Wrap(limitBodies(mux), httpguard.Options{
		AllowedHosts: d.AllowedHosts, BindAddress: d.ListenAddress, Token: d.Token,
		TokenHelp:  "meshperf pilot's --api-token or $" + TokenEnv + "; meshperf apply, get and delete send it with --token or $" + TokenEnv,
		WriteTypes: append([]string{httpguard.JSON}, httpguard.YAMLTypes...),
		TokenPaths: []string{"/debug/"},
	})
}

// limitBodies caps every request's body at MaxBodyBytes, so that no
// endpoint, today's or a later one, reads more; a body declared larger is
// refused before any of it is read.
func limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > MaxBodyBytes {
			writeError(w, http.StatusRequestEntityTooLarge, bodyTooLarge)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// bodyTooLarge is the refusal of a body over MaxBodyBytes.
var bodyTooLarge = fmt.Sprintf("request body is larger than %d MiB (%d bytes): split the config into several applies", MaxBodyBytes>>20, MaxBodyBytes)

// only answers 405 for any method but want (HEAD is accepted where GET is).
func (h *handler) only(want string, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == want || (want == http.MethodGet && r.Method == http.MethodHead) {
			next(w, r)
			return
		}
		allow := want
		if want == http.MethodGet {
			allow += ", " + http.MethodHead
		}
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, excerpt.String(r.Method+" "+r.URL.Path)+": method not allowed, use "+want)
	}
}

func ready(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

// writeJSON answers v as one JSON document followed by a newline.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encoding the answer: "+err.Error())
		return
	}
	writeRawJSON(w, status, b)
}

func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if len(b) == 0 || b[len(b)-1] != '\n' {
		_, _ = w.Write([]byte("\n"))
	}
}

// maxErrorBytes bounds an error message. Messages quote a prefix of what
// the client sent where they quote it; this bound is for a message that
// still grew (many problems, each at its bound).
const maxErrorBytes = 8 << 10

// writeError answers {"error": msg}, msg flattened to one line: clients
// print it as the one line a user sees.
func writeError(w http.ResponseWriter, status int, msg string) {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxErrorBytes {
		msg = strings.ToValidUTF8(msg[:maxErrorBytes], "") + fmt.Sprintf("... (the message's other %d bytes left out)", len(msg)-maxErrorBytes)
	}
	b, _ := json.Marshal(ErrorResponse{Error: msg}) // a struct of one string cannot fail
	writeRawJSON(w, status, b)
}
