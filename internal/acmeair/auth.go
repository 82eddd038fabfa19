package acmeair

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/meshperf/meshperf/internal/svcmetrics"
)

// auth logs users in: it asks customer whether the login and password are
// right and, if so, issues a JWT for the login.
type auth struct {
	signer   signer
	customer peer
	validate string // customer's validateid URL
	log      *slog.Logger
	now      func() time.Time
}

// validation is customer's answer to validateid (its LoginResponse).
type validation struct {
	Validated bool `json:"validated"`
}

func newAuth(cfg Config, m *svcmetrics.Metrics) (*Service, error) {
	a := &auth{
		signer:   signer{key: cfg.JWTKey},
		customer: newPeer(peerClient(cfg, 10*time.Second), m, ServiceCustomer),
		validate: orDefault(cfg.CustomerURL, ServiceCustomer) + "/customer/internal/validateid",
		log:      cfg.Log,
		now:      cfg.Now,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /auth/login", a.login)
	mux.HandleFunc("GET /auth/status", status)
	return &Service{name: ServiceAuth, handler: mux, closers: []func() error{func() error {
		a.customer.client.CloseIdleConnections()
		return nil
	}}}, nil
}

// login is POST /auth/login with the form values login and password. It
// answers 200 "logged in" with the token in the Bearer cookie (and the
// login in loggedinuser), 403 for a wrong login or password.
func (a *auth) login(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		fail(w, a.log, http.StatusBadRequest, err)
		return
	}
	v, err := requiredForm(r, "login", "password")
	if err != nil {
		fail(w, a.log, http.StatusBadRequest, err)
		return
	}
	ok, err := a.validateCustomer(r.Context(), v[0], v[1])
	if err != nil {
		fail(w, a.log, http.StatusBadGateway, err)
		return
	}
	if !ok {
		http.Error(w, "wrong login or password", http.StatusForbidden)
		return
	}
	token, err := a.signer.issue(v[0], a.now())
	if err != nil {
		fail(w, a.log, http.StatusInternalServerError, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: jwtCookie, Value: token, Path: "/"})
	http.SetCookie(w, &http.Cookie{Name: userCookie, Value: url.QueryEscape(v[0]), Path: "/"})
	writeText(w, "logged in")
}

func (a *auth) validateCustomer(ctx context.Context, login, password string) (bool, error) {
	var v validation
	err := a.customer.postForm(ctx, a.validate, url.Values{"login": {login}, "password": {password}}, &v)
	if err != nil {
		return false, fmt.Errorf("validate with customer: %w", err)
	}
	return v.Validated, nil
}

// status is every service's GET /SERVICE/status: "OK" once it serves.
func status(w http.ResponseWriter, _ *http.Request) { writeText(w, "OK") }

// errNotFound is a customer, flight or booking that does not exist.
var errNotFound = errors.New("not found")
