// Package httpguard keeps web pages out of meshperf's browser-facing HTTP
// servers (the dashboard, pilot's API and monitoring ports). A page the
// user visits can send requests to any address the browser reaches,
// loopback included; the guard refuses what such a page could do:
//
//   - DNS rebinding: a name the attacker owns, re-pointed at 127.0.0.1,
//     makes the page same-origin with the server, so it could read
//     whatever the server serves. Every request's Host must be one of the
//     server's own names: an IP literal (which cannot be rebound),
//     localhost, the name it was bound to, or a name the operator allowed.
//   - Cross-site writes: a form or a no-cors fetch can POST without a CORS
//     preflight. Writes (any method but GET, HEAD and OPTIONS) must pass
//     net/http's CrossOriginProtection and declare a content type that no
//     form and no no-cors fetch can send (application/json, or YAML).
//   - Callers without the token: when the server has one, writes and the
//     paths that expose internals need it as a bearer token.
//
// It does not guard against a caller that is not a browser and reaches the
// port: that caller sets any Host and header it likes, and only the token
// (or binding loopback) keeps it out. Nor does it encrypt: a token sent
// over plain HTTP off the machine can be read on the way.
package httpguard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/excerpt"
)

// JSON is the content type writes declare unless Options says otherwise.
const JSON = "application/json"

// YAMLTypes are the content types of a YAML body: pilot's apply and delete.
var YAMLTypes = []string{"application/yaml", "application/x-yaml", "text/yaml"}

// AnyHost, in Options.AllowedHosts, accepts every Host: for a server behind
// a proxy that rewrites it. DNS rebinding is then no longer refused.
const AnyHost = "*"

// Options say what a server accepts.
type Options struct {
	// AllowedHosts are the names accepted in Host besides IP literals,
	// localhost and the bind address's name (--allowed-hosts); AnyHost
	// accepts every one.
	AllowedHosts []string
	// BindAddress is the address the server was told to listen on
	// (host:port, as given): its host, when a name, is one of its names.
	BindAddress string
	// Token, when set, is required as "Authorization: Bearer TOKEN" on
	// every write and on TokenPaths.
	Token string
	// TokenHelp says where a client finds the token, for the refusal.
	TokenHelp string
	// WriteTypes are the content types a write may declare; JSON when
	// empty.
	WriteTypes []string
	// TokenPaths are path prefixes whose every request needs the token
	// (debug endpoints, which expose the process's internals).
	TokenPaths []string
}

// guard is one server's compiled Options.
type guard struct {
	next       http.Handler
	names      map[string]bool
	anyHost    bool
	tokenSum   [sha256.Size]byte
	hasToken   bool
	tokenHelp  string
	writeTypes []string
	tokenPaths []string
	origins    *http.CrossOriginProtection
}

// Wrap returns next behind the guard. Refusals are one line in JSON,
// {"error": "..."}, as the servers' own errors are: 403 for a foreign Host
// or a cross-origin write, 415 for a write's content type, 401 (with
// WWW-Authenticate: Bearer) for a missing or wrong token.
func Wrap(next http.Handler, o Options) http.Handler {
	g := &guard{next: next, names: map[string]bool{}, tokenHelp: o.TokenHelp,
		writeTypes: o.WriteTypes, tokenPaths: o.TokenPaths, origins: http.NewCrossOriginProtection()}
	if len(g.writeTypes) == 0 {
		g.writeTypes = []string{JSON}
	}
	for _, h := range o.AllowedHosts {
		if h == AnyHost {
			g.anyHost = true
		}
		g.names[canonicalHost(h)] = true
	}
	if host, _, err := net.SplitHostPort(o.BindAddress); err == nil && host != "" {
		if _, err := netip.ParseAddr(host); err != nil {
			g.names[canonicalHost(host)] = true
		}
	}
	if o.Token != "" {
		g.tokenSum, g.hasToken = sha256.Sum256([]byte(o.Token)), true
	}
	return g
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.knownHost(r.Host) {
		refuse(w, http.StatusForbidden, fmt.Sprintf("host %s is not one of this server's names (an IP address, localhost, or --allowed-hosts); refused as DNS rebinding",
			excerpt.Quote(canonicalHost(r.Host))))
		return
	}
	write := r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
	if write {
		if err := g.origins.Check(r); err != nil {
			refuse(w, http.StatusForbidden, crossOriginMessage(r))
			return
		}
		if msg := g.contentTypeProblem(r); msg != "" {
			refuse(w, http.StatusUnsupportedMediaType, msg)
			return
		}
	}
	if g.hasToken && (write || g.tokenPath(r.URL.Path)) {
		if msg := g.tokenProblem(r); msg != "" {
			w.Header().Set("WWW-Authenticate", "Bearer")
			refuse(w, http.StatusUnauthorized, msg)
			return
		}
	}
	g.next.ServeHTTP(w, r)
}

// knownHost applies the allow-list to a Host header.
func (g *guard) knownHost(hostHeader string) bool {
	if hostHeader == "" || g.anyHost {
		return true // HTTP/1.0 sends none; a browser always does
	}
	host := canonicalHost(hostHeader)
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host == "localhost" || strings.HasSuffix(host, ".localhost") || g.names[host]
}

// canonicalHost is a Host header's host as the allow-list compares it:
// the port and IPv6 brackets removed, lower case, without a trailing dot.
func canonicalHost(h string) string {
	switch {
	case strings.HasPrefix(h, "["):
		if end := strings.IndexByte(h, ']'); end > 0 {
			h = h[1:end]
		}
	case strings.Count(h, ":") == 1:
		h = h[:strings.IndexByte(h, ':')]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func crossOriginMessage(r *http.Request) string {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return fmt.Sprintf("a request from another site (Sec-Fetch-Site: %s) cannot change anything here; refused as cross-site request forgery",
			excerpt.String(site))
	}
	return fmt.Sprintf("a request from Origin %s, which is not this server (Host %s), cannot change anything here; refused as cross-site request forgery",
		excerpt.Quote(r.Header.Get("Origin")), excerpt.Quote(r.Host))
}

// contentTypeProblem says why a write's declared content type is refused,
// or "" when it is one of the server's.
func (g *guard) contentTypeProblem(r *http.Request) string {
	declared := r.Header.Get("Content-Type")
	mediaType, _, err := mime.ParseMediaType(declared)
	if err == nil && slices.Contains(g.writeTypes, strings.ToLower(mediaType)) {
		return ""
	}
	got := "none"
	if declared != "" {
		got = excerpt.Quote(declared)
	}
	want := g.writeTypes[0]
	if len(g.writeTypes) > 1 {
		want += " (or " + strings.Join(g.writeTypes[1:], ", ") + ")"
	}
	return fmt.Sprintf("%s: Content-Type %s is not one this server takes; send Content-Type: %s, which a web form cannot send",
		excerpt.String(r.Method+" "+r.URL.Path), got, want)
}

// tokenProblem says why a request's bearer token is refused, or "" when it
// is the server's. The tokens are compared as SHA-256 sums in constant
// time: neither their content nor their length shows in the timing.
func (g *guard) tokenProblem(r *http.Request) string {
	what := excerpt.String(r.Method + " " + r.URL.Path)
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return fmt.Sprintf("%s needs this server's token: send Authorization: Bearer TOKEN (%s)", what, g.tokenHelp)
	}
	sum := sha256.Sum256([]byte(got))
	if subtle.ConstantTimeCompare(sum[:], g.tokenSum[:]) != 1 {
		return fmt.Sprintf("%s: the bearer token is not this server's; send Authorization: Bearer TOKEN (%s)", what, g.tokenHelp)
	}
	return ""
}

func (g *guard) tokenPath(path string) bool {
	for _, p := range g.tokenPaths {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// refuse answers {"error": msg} with status.
func refuse(w http.ResponseWriter, status int, msg string) {
	body, _ := json.Marshal(map[string]string{"error": msg}) // a string always encodes
	w.Header().Set("Content-Type", JSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// ParseAllowedHosts reads --allowed-hosts: names separated by commas, or
// AnyHost. A name is a host alone: a scheme, port or path there would
// never match a Host and is refused rather than ignored.
func ParseAllowedHosts(list string) ([]string, error) {
	var hosts []string
	entries := strings.Split(list, ",")
	for _, h := range entries {
		h = strings.TrimSpace(h)
		switch {
		case h == "":
			continue
		case h == AnyHost:
		case !validName(h):
			which := "not a host name"
			if len(entries) > 1 { // the flag's own message quotes the whole list
				which = excerpt.Quote(h) + " is not a host name"
			}
			return nil, fmt.Errorf("%s: want names such as pilot.example.com, separated by commas, without scheme or port, or %s for any", which, AnyHost)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// validName accepts a DNS name's characters (letters, digits, '-', '_'
// and dots between labels).
func validName(h string) bool {
	for _, label := range strings.Split(strings.TrimSuffix(h, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return len(h) <= 253
}

// NewToken returns a new random token: 128 bits, hex-encoded.
func NewToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
