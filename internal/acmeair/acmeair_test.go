package acmeair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/meshperf/meshperf/internal/testutil"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// app is the services started in-process, each on its own loopback port.
type app struct {
	urls     map[string]string
	services map[string]*Service
}

// startApp starts customer and flight, then auth and booking pointed at
// them (booking's customer at customerURL when given), with n customers.
func startApp(t *testing.T, n int, customerURL string) *app {
	t.Helper()
	dir := t.TempDir()
	a := &app{urls: map[string]string{}, services: map[string]*Service{}}
	start := func(name string, cfg Config) {
		cfg.Service, cfg.DataDir, cfg.JWTKey, cfg.Customers = name, dir, testKey, n
		s, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("start %s: %v", name, err)
		}
		srv := httptest.NewServer(s.Handler())
		t.Cleanup(func() {
			srv.Close()
			if err := s.Close(); err != nil {
				t.Errorf("close %s: %v", name, err)
			}
		})
		a.urls[name], a.services[name] = srv.URL, s
	}
	start(ServiceCustomer, Config{})
	start(ServiceFlight, Config{})
	start(ServiceAuth, Config{CustomerURL: a.urls[ServiceCustomer]})
	if customerURL == "" {
		customerURL = a.urls[ServiceCustomer]
	}
	start(ServiceBooking, Config{CustomerURL: customerURL, FlightURL: a.urls[ServiceFlight]})
	start(ServiceMain, Config{})
	return a
}

// do makes a call with an optional form and token and returns the status
// and body.
func do(t *testing.T, method, u string, form url.Values, token string) (int, string, *http.Response) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func (a *app) login(t *testing.T, user string) string {
	t.Helper()
	code, body, resp := do(t, "POST", a.urls[ServiceAuth]+"/auth/login",
		url.Values{"login": {user}, "password": {CustomerPassword}}, "")
	if code != 200 || body != "logged in" {
		t.Fatalf("login %s: %d %q", user, code, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == jwtCookie {
			return c.Value
		}
	}
	t.Fatalf("login %s: no %s cookie in %v", user, jwtCookie, resp.Header["Set-Cookie"])
	return ""
}

func TestLoginIssuesATokenThatCustomerAccepts(t *testing.T) {
	a := startApp(t, 20, "")
	token := a.login(t, CustomerID(7))
	code, body, _ := do(t, "GET", a.urls[ServiceCustomer]+"/customer/byid/"+CustomerID(7), nil, token)
	if code != 200 {
		t.Fatalf("profile with the token: %d %s", code, body)
	}
	var k Customer
	if err := json.Unmarshal([]byte(body), &k); err != nil || k.ID != CustomerID(7) || k.Status != "GOLD" || k.Password != "" {
		t.Fatalf("profile %+v (%v) from %s", k, err, body)
	}
	// The cookie the reference app sets is accepted as well.
	req, _ := http.NewRequest("GET", a.urls[ServiceCustomer]+"/customer/byid/"+CustomerID(7), nil)
	req.AddCookie(&http.Cookie{Name: jwtCookie, Value: token})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("profile with the cookie: %d", resp.StatusCode)
	}
	// An update with the password is stored and answered.
	k.Password, k.PhoneNumber = CustomerPassword, "919-555-0000"
	b, _ := json.Marshal(k)
	req, _ = http.NewRequest("POST", a.urls[ServiceCustomer]+"/customer/byid/"+CustomerID(7), strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var stored Customer
	_ = json.NewDecoder(resp.Body).Decode(&stored)
	resp.Body.Close()
	if resp.StatusCode != 200 || stored.PhoneNumber != "919-555-0000" {
		t.Errorf("update: %d, stored %+v", resp.StatusCode, stored)
	}
}

func TestLoginRefusesABadPasswordAndAnUnknownUser(t *testing.T) {
	a := startApp(t, 20, "")
	for _, form := range []url.Values{
		{"login": {CustomerID(1)}, "password": {"wrong"}},
		{"login": {CustomerID(20)}, "password": {CustomerPassword}}, // one past the loaded ones
	} {
		code, _, resp := do(t, "POST", a.urls[ServiceAuth]+"/auth/login", form, "")
		if code != http.StatusForbidden || len(resp.Cookies()) != 0 {
			t.Errorf("login %v: %d, cookies %v; want 403 and none", form, code, resp.Cookies())
		}
	}
	if code, body, _ := do(t, "POST", a.urls[ServiceAuth]+"/auth/login", url.Values{"login": {CustomerID(1)}}, ""); code != 400 || !strings.Contains(body, "password") {
		t.Errorf("login without a password: %d %q; want 400 naming it", code, body)
	}
}

func TestUserCallsRefuseAMissingOrBadToken(t *testing.T) {
	a := startApp(t, 20, "")
	user := CustomerID(3)
	other := a.login(t, CustomerID(4))
	forged, err := signer{key: []byte("not the key the services share")}.issue(user, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	expired, err := signer{key: testKey}.issue(user, time.Now().Add(-2*jwtLifetime))
	if err != nil {
		t.Fatal(err)
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, claims{Groups: []string{jwtGroup},
		RegisteredClaims: jwt.RegisteredClaims{Issuer: jwtIssuer, Subject: user,
			ExpiresAt: jwt.NewNumericDate(time.Now().Add(time.Hour))}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		method, url string
		form        url.Values
	}{
		{"GET", a.urls[ServiceCustomer] + "/customer/byid/" + user, nil},
		{"GET", a.urls[ServiceBooking] + "/booking/byuser/" + user, nil},
		{"POST", a.urls[ServiceBooking] + "/booking/bookflights", url.Values{"userid": {user}, "toFlightId": {"x"}, "toFlightSegId": {"AA0"}, "oneWayFlight": {"true"}}},
		{"POST", a.urls[ServiceBooking] + "/booking/cancelbooking", url.Values{"userid": {user}, "number": {"x"}}},
	}
	for _, c := range calls {
		for name, token := range map[string]string{"no": "", "forged": forged, "expired": expired, "unsigned": none} {
			if code, _, _ := do(t, c.method, c.url, c.form, token); code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s token: %d, want 401", c.method, c.url, name, code)
			}
		}
		if code, _, _ := do(t, c.method, c.url, c.form, other); code != http.StatusForbidden {
			t.Errorf("%s %s with another user's token: %d, want 403", c.method, c.url, code)
		}
	}
	q := url.Values{"fromAirport": {"AMS"}, "toAirport": {"LHR"}, "fromDate": {"2026-01-01"}, "oneWay": {"true"}}
	if code, _, _ := do(t, "POST", a.urls[ServiceFlight]+"/flight/queryflights", q, ""); code != http.StatusUnauthorized {
		t.Errorf("queryflights without a token: %d, want 401", code)
	}
	if code, _, _ := do(t, "POST", a.urls[ServiceFlight]+"/flight/queryflights", q, other); code != 200 {
		t.Errorf("queryflights with a token: %d, want 200", code)
	}
}

// searchOneWay finds today's flight on the first route.
func (a *app) searchOneWay(t *testing.T, token string) Flight {
	t.Helper()
	r := Routes()[0]
	q := url.Values{"fromAirport": {r.From}, "toAirport": {r.To},
		"fromDate": {utcDay(time.Now()).Format(FlightDate)}, "oneWay": {"true"}}
	code, body, _ := do(t, "POST", a.urls[ServiceFlight]+"/flight/queryflights", q, token)
	var trip TripOptions
	if err := json.Unmarshal([]byte(body), &trip); code != 200 || err != nil || trip.TripLegs != 1 ||
		len(trip.TripFlights) != 1 || len(trip.TripFlights[0].FlightsOptions) != 1 {
		t.Fatalf("search %v: %d %s", q, code, body)
	}
	f := trip.TripFlights[0].FlightsOptions[0]
	if f.FlightSegmentID != r.ID || f.FlightSegment.Miles != r.Miles {
		t.Fatalf("flight %+v, want route %+v", f, r)
	}
	return f
}

func (a *app) totalMiles(t *testing.T, user, token string) int64 {
	t.Helper()
	code, body, _ := do(t, "GET", a.urls[ServiceCustomer]+"/customer/byid/"+user, nil, token)
	var k Customer
	if err := json.Unmarshal([]byte(body), &k); code != 200 || err != nil {
		t.Fatalf("profile: %d %s", code, body)
	}
	return k.TotalMiles
}

func TestBookingAddsTheMilesInTheBackgroundAndCancelTakesThemBack(t *testing.T) {
	a := startApp(t, 20, "")
	user := CustomerID(5)
	token := a.login(t, user)
	f := a.searchOneWay(t, token)
	code, body, _ := do(t, "POST", a.urls[ServiceBooking]+"/booking/bookflights", url.Values{"userid": {user},
		"toFlightId": {f.ID}, "toFlightSegId": {f.FlightSegmentID}, "oneWayFlight": {"true"}}, token)
	var ans BookingAnswer
	if err := json.Unmarshal([]byte(body), &ans); code != 200 || err != nil || !ans.OneWay || ans.DepartBookingID == "" {
		t.Fatalf("book: %d %s", code, body)
	}
	miles := func(want int64) func() error {
		return func() error {
			if got := a.totalMiles(t, user, token); got != want {
				return fmt.Errorf("total miles %d, want %d", got, want)
			}
			return nil
		}
	}
	testutil.Eventually(t, 10*time.Second, miles(int64(f.FlightSegment.Miles)))

	code, body, _ = do(t, "GET", a.urls[ServiceBooking]+"/booking/byuser/"+user, nil, token)
	var list []Booking
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list) != 1 ||
		list[0].ID != ans.DepartBookingID || list[0].FlightID != f.ID {
		t.Fatalf("bookings: %d %s", code, body)
	}
	code, body, _ = do(t, "POST", a.urls[ServiceBooking]+"/booking/cancelbooking",
		url.Values{"userid": {user}, "number": {ans.DepartBookingID}}, token)
	if code != 200 || body != "booking "+ans.DepartBookingID+" deleted." {
		t.Fatalf("cancel: %d %q", code, body)
	}
	testutil.Eventually(t, 10*time.Second, miles(0))
	// A second cancel is answered, and takes nothing back.
	if code, _, _ := do(t, "POST", a.urls[ServiceBooking]+"/booking/cancelbooking",
		url.Values{"userid": {user}, "number": {ans.DepartBookingID}}, token); code != 200 {
		t.Errorf("second cancel: %d", code)
	}
	if code, body, _ := do(t, "GET", a.urls[ServiceBooking]+"/booking/byuser/"+user, nil, token); code != 200 || body != "[]\n" {
		t.Errorf("bookings after the cancel: %d %q", code, body)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if c := a.services[ServiceBooking]; c == nil {
			return errors.New("no booking service")
		}
		got := rewards(t, a)
		if got != (RewardCounts{FlightSuccesses: 2, CustomerSuccesses: 2}) {
			return fmt.Errorf("rewards %+v, want two updates, both fine", got)
		}
		return nil
	})
	if got := a.totalMiles(t, user, token); got != 0 {
		t.Errorf("total miles %d after the second cancel, want 0", got)
	}
}

func rewards(t *testing.T, a *app) RewardCounts {
	t.Helper()
	code, body, _ := do(t, "GET", a.urls[ServiceBooking]+"/booking/rewards", nil, "")
	var c RewardCounts
	if err := json.Unmarshal([]byte(body), &c); code != 200 || err != nil {
		t.Fatalf("rewards: %d %s", code, body)
	}
	return c
}

func TestAStalledCustomerDoesNotHoldUpTheBooking(t *testing.T) {
	release := make(chan struct{})
	var finished atomic.Int64 // updates the stalled customer has given up on
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer finished.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer stalled.Close()
	defer close(release)
	a := startApp(t, 20, stalled.URL)
	user := CustomerID(2)
	token := a.login(t, user)
	f := a.searchOneWay(t, token)
	// The booking is answered while customer still holds the update (the
	// stalled handler lets go only when booking's timeout cancels the
	// call): a booking that waited for the update would answer after.
	code, body, _ := do(t, "POST", a.urls[ServiceBooking]+"/booking/bookflights", url.Values{"userid": {user},
		"toFlightId": {f.ID}, "toFlightSegId": {f.FlightSegmentID}, "oneWayFlight": {"true"}}, token)
	if code != 200 {
		t.Fatalf("book with customer stalled: %d %s", code, body)
	}
	if n := finished.Load(); n != 0 {
		t.Errorf("the booking was answered after %d reward update(s) ended; it should not wait for them", n)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := rewards(t, a); got != (RewardCounts{FlightSuccesses: 1, CustomerFailures: 1}) {
			return fmt.Errorf("rewards %+v, want the customer update timed out", got)
		}
		return nil
	})
}

func TestMainServesItsPage(t *testing.T) {
	a := startApp(t, 1, "")
	if code, body, _ := do(t, "GET", a.urls[ServiceMain]+"/", nil, ""); code != 200 || !strings.Contains(body, "Acme Air") {
		t.Errorf("main page: %d %q", code, body)
	}
}

func TestNewRefusesAnUnknownServiceAndAMissingKey(t *testing.T) {
	if _, err := New(context.Background(), Config{Service: "payments", JWTKey: testKey}); err == nil || !strings.Contains(err.Error(), "payments") {
		t.Errorf("unknown service: %v", err)
	}
	if _, err := New(context.Background(), Config{Service: ServiceBooking, DataDir: t.TempDir()}); err == nil {
		t.Error("booking without a key started")
	}
}
