// Package acmeair is an Acmeair-like airline app and BluePerf's driver for
// it: the realistic-application benchmark Istio ran, on this machine. Five
// services (auth, customer, flight, booking, main) serve the reference
// app's HTTP/1.1 JSON API under its paths, each with its own SQLite
// database, calling each other as the reference app does (login validates
// with customer; booking asks flight for a segment's miles and customer to
// add them, in the background), with a JWT from auth checked on every
// user-facing call. The driver plays BluePerf's JMeter mix and records
// each transaction's latency.
package acmeair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshperf/meshperf/internal/svcmetrics"
)

// The services, by the names their Kubernetes Services have in the
// reference app's manifests (and the lab's hosts files).
const (
	ServiceAuth     = "auth"
	ServiceCustomer = "customer"
	ServiceFlight   = "flight"
	ServiceBooking  = "booking"
	ServiceMain     = "main"
)

// Services are every service's name, in the order they are listed.
var Services = []string{ServiceAuth, ServiceCustomer, ServiceFlight, ServiceBooking, ServiceMain}

// DefaultPort is the port every service listens on in the reference app.
const DefaultPort = 8080

// DefaultRewardTimeout is how long booking gives the reward update (flight's
// miles, then customer's total) before counting it failed, the reference
// app's @Timeout(500).
const DefaultRewardTimeout = 500 * time.Millisecond

// DefaultURL is where a service is reached by name, as inside the mesh.
func DefaultURL(service string) string {
	return fmt.Sprintf("http://%s:%d", service, DefaultPort)
}

// Config is what a service needs.
type Config struct {
	Service string // one of Services
	DataDir string // the service's database lives here
	JWTKey  []byte // HS256 key, shared by every service
	// CustomerURL and FlightURL are the base URLs of the services this one
	// calls (auth calls customer; booking calls both); empty: DefaultURL.
	CustomerURL, FlightURL string
	// Dial dials those services; nil: the system's resolver. The lab passes
	// a hosts.Table's Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Customers is how many customers the customer service loads into an
	// empty database (DefaultCustomers when 0).
	Customers int
	// FlightDays is the flight loader's NUM_DAYS_TO_LOAD (DefaultFlightDays
	// when 0).
	FlightDays int
	// RewardTimeout bounds booking's reward update (DefaultRewardTimeout
	// when 0).
	RewardTimeout time.Duration
	Log           *slog.Logger // nil: discard
	// Now is the clock (time.Now when nil); tests move "today".
	Now func() time.Time
	// Registry holds the service's metrics, served on GET /metrics (a
	// registry of its own when nil).
	Registry *prometheus.Registry
}

// Service is one running service: its handler and what it holds open.
type Service struct {
	name    string
	handler http.Handler
	closers []func() error
}

// Handler serves the service's API.
func (s *Service) Handler() http.Handler { return s.handler }

// Name is the service's name.
func (s *Service) Name() string { return s.name }

// Close waits for the service's background work and closes its database.
func (s *Service) Close() error {
	var errs []error
	for _, c := range slices.Backward(s.closers) {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// New opens the service's database, loads the standard data set into it if
// it is empty, and returns the service ready to serve.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Customers == 0 {
		cfg.Customers = DefaultCustomers
	}
	if cfg.FlightDays == 0 {
		cfg.FlightDays = DefaultFlightDays
	}
	if cfg.RewardTimeout == 0 {
		cfg.RewardTimeout = DefaultRewardTimeout
	}
	if cfg.Service != ServiceMain && len(cfg.JWTKey) == 0 {
		return nil, errors.New("a JWT key is needed")
	}
	if !slices.Contains(Services, cfg.Service) {
		return nil, fmt.Errorf("unknown service %q: want one of %s", cfg.Service, strings.Join(Services, ", "))
	}
	reg := cfg.Registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := svcmetrics.New(reg)
	if err != nil {
		return nil, fmt.Errorf("%s metrics: %w", cfg.Service, err)
	}
	var s *Service
	switch cfg.Service {
	case ServiceAuth:
		s, err = newAuth(cfg, m)
	case ServiceCustomer:
		s, err = newCustomer(ctx, cfg)
	case ServiceFlight:
		s, err = newFlight(ctx, cfg)
	case ServiceBooking:
		s, err = newBooking(ctx, cfg, m)
	case ServiceMain:
		s = newMain()
	}
	if err != nil {
		return nil, err
	}
	s.handler = instrument(s.handler, m, reg)
	return s, nil
}

// peerClient is the HTTP client a service calls the others with: kept-alive
// connections, as the reference app's MicroProfile REST clients keep them,
// dialled through cfg.Dial.
func peerClient(cfg Config, timeout time.Duration) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	dial := d.DialContext
	if cfg.Dial != nil {
		dial = cfg.Dial
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:         dial,
			MaxIdleConnsPerHost: 256,
			IdleConnTimeout:     90 * time.Second,
		},
	}
}

func orDefault(url, service string) string {
	if url == "" {
		return DefaultURL(service)
	}
	return strings.TrimSuffix(url, "/")
}

// maxFormBytes bounds a request body: every form and JSON body of the API
// is a few hundred bytes.
const maxFormBytes = 64 << 10

// readForm parses a urlencoded body, refusing anything else.
func readForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/x-www-form-urlencoded") {
		return fmt.Errorf("content type %q: want application/x-www-form-urlencoded", ct)
	}
	return r.ParseForm()
}

// requiredForm returns the named form values, or an error naming the first
// one missing.
func requiredForm(r *http.Request, names ...string) ([]string, error) {
	vs := make([]string, len(names))
	for i, n := range names {
		vs[i] = r.PostForm.Get(n)
		if vs[i] == "" {
			return nil, fmt.Errorf("form value %q is missing", n)
		}
	}
	return vs, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, s)
}

// fail answers with status and one line saying why, logging server errors.
func fail(w http.ResponseWriter, log *slog.Logger, status int, err error) {
	if status >= 500 {
		log.Error("request failed", "err", err)
	}
	http.Error(w, err.Error(), status)
}

// authorize checks the token and that it is the named user's own: each
// user may only see and change their own profile and bookings, as in the
// reference app. It answers 401 (no or bad token) or 403 (someone else's)
// and returns false when the call may not go on.
func authorize(w http.ResponseWriter, r *http.Request, s signer, user string) bool {
	sub, err := s.subject(r)
	if err != nil {
		http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
		return false
	}
	if sub != user {
		http.Error(w, "forbidden: the token is "+sub+"'s, not "+user+"'s", http.StatusForbidden)
		return false
	}
	return true
}

// postForm posts a form to the peer at url and decodes its JSON answer
// into out.
func (p peer) postForm(ctx context.Context, url string, form url.Values, out any) error {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	p.sent.Inc()
	p.size.Observe(float64(len(body)))
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxFormBytes)).Decode(out)
}
