package acmeair

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshperf/meshperf/pkg/histogram"
)

// The driver's transactions, named as the reference JMeter script names
// its samplers, in the order an iteration makes them.
const (
	TxLogin          = "Login"
	TxViewProfile    = "View Profile"
	TxUpdateCustomer = "Update Customer"
	TxQueryFlight    = "QueryFlight"
	TxBookFlight     = "BookFlight"
	TxListBookings   = "List Bookings"
	TxCancelBooking  = "Cancel Booking"
)

// Transactions are every transaction, in iteration order.
var Transactions = []string{TxLogin, TxViewProfile, TxUpdateCustomer, TxQueryFlight, TxBookFlight,
	TxListBookings, TxCancelBooking}

// BluePerf's mix, from its JMeter script.
const (
	DefaultUsers     = 50  // threads
	DefaultUserIDs   = 200 // users uid0 .. uid199 log in, at random
	DefaultDuration  = 60 * time.Second
	innerLoops       = 5    // after each login
	queriesPerLoop   = 5    // QueryFlight per inner loop
	profileShare     = 0.25 // View Profile + Update Customer
	cancelShare      = 0.25 // cancel the bookings beyond the first two
	bookingsKept     = 2
	outboundDays     = 6 // outbound today+0..5
	returnFirstDay   = 6 // return today+6..12
	returnDays       = 7
	defaultCallLimit = 30 * time.Second
)

// DriverConfig is a run of the driver.
type DriverConfig struct {
	Users    int           // concurrent users (DefaultUsers when 0)
	UserIDs  int           // customers logged in as, uid0.. (DefaultUserIDs when 0)
	Duration time.Duration // the run ends after this (DefaultDuration when 0)
	// Iterations, when > 0, ends each user after this many iterations
	// (a login and its five rounds), if the duration has not ended it.
	Iterations int
	// The services' base URLs; empty: DefaultURL.
	AuthURL, CustomerURL, FlightURL, BookingURL string
	// Dial dials the services; nil: the system's resolver.
	Dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	CallTimeout time.Duration // per call (30 s when 0)
	Seed        uint64        // 0: random
	Now         func() time.Time
}

// txStats are one transaction's calls.
type txStats struct {
	latency *histogram.Concurrent
	calls   atomic.Int64
	errors  atomic.Int64
}

// driver is a run under way.
type driver struct {
	cfg   DriverConfig
	urls  map[string]string
	tx    map[string]*txStats
	all   *histogram.Concurrent // every call, as the Fortio result's DurationHistogram
	errs  *histogram.Concurrent // failed calls
	mu    sync.Mutex
	codes map[int]int64
}

// Drive runs the mix until the duration ends (or ctx does, or every user
// has made its iterations) and returns what it measured.
func Drive(ctx context.Context, cfg DriverConfig) (*Result, error) {
	if cfg.Users == 0 {
		cfg.Users = DefaultUsers
	}
	if cfg.UserIDs == 0 {
		cfg.UserIDs = DefaultUserIDs
	}
	if cfg.Duration == 0 {
		cfg.Duration = DefaultDuration
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = defaultCallLimit
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Users < 0 || cfg.UserIDs < 0 || cfg.Duration < 0 || cfg.Iterations < 0 {
		return nil, errors.New("users, user ids, duration and iterations cannot be negative")
	}
	if cfg.Seed == 0 {
		cfg.Seed = rand.Uint64()
	}
	d := &driver{
		cfg: cfg,
		urls: map[string]string{
			ServiceAuth: orDefault(cfg.AuthURL, ServiceAuth), ServiceCustomer: orDefault(cfg.CustomerURL, ServiceCustomer),
			ServiceFlight: orDefault(cfg.FlightURL, ServiceFlight), ServiceBooking: orDefault(cfg.BookingURL, ServiceBooking),
		},
		tx:    map[string]*txStats{},
		all:   histogram.NewConcurrent(histogram.Latency),
		errs:  histogram.NewConcurrent(histogram.Latency),
		codes: map[int]int64{},
	}
	for _, name := range Transactions {
		d.tx[name] = &txStats{latency: histogram.NewConcurrent(histogram.Latency)}
	}
	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for u := range cfg.Users {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(u)))
		wg.Go(func() { d.runUser(runCtx, rng) })
	}
	wg.Wait()
	return d.result(start, time.Since(start)), nil
}

// user is one simulated user: its own connections (a JMeter thread keeps
// its own) and its state between calls.
type user struct {
	d      *driver
	client *http.Client
	rng    *rand.Rand
	login  string
	token  string
	// found is the last search's first flight of each leg, or nil.
	found []Flight
}

func (d *driver) runUser(ctx context.Context, rng *rand.Rand) {
	dial := (&net.Dialer{Timeout: 5 * time.Second}).DialContext
	if d.cfg.Dial != nil {
		dial = d.cfg.Dial
	}
	tr := &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}
	defer tr.CloseIdleConnections()
	u := &user{d: d, client: &http.Client{Transport: tr, Timeout: d.cfg.CallTimeout}, rng: rng}
	for i := 0; d.cfg.Iterations == 0 || i < d.cfg.Iterations; i++ {
		if ctx.Err() != nil {
			return
		}
		u.iteration(ctx)
	}
}

// iteration is one pass of the JMeter script's thread: a login as a random
// user, then five rounds of searching, booking and listing.
func (u *user) iteration(ctx context.Context) {
	u.login = CustomerID(u.rng.IntN(u.d.cfg.UserIDs))
	u.token = ""
	if !u.doLogin(ctx) {
		return
	}
	for range innerLoops {
		if ctx.Err() != nil {
			return
		}
		if u.rng.Float64() < profileShare {
			if k, ok := u.viewProfile(ctx); ok {
				u.updateCustomer(ctx, k)
			}
		}
		for range queriesPerLoop {
			u.queryFlight(ctx)
		}
		if u.found != nil {
			u.bookFlight(ctx)
		}
		bookings, ok := u.listBookings(ctx)
		if ok && len(bookings) > bookingsKept && u.rng.Float64() < cancelShare {
			for _, b := range bookings[bookingsKept:] {
				u.cancelBooking(ctx, b.ID)
			}
		}
	}
}

func (u *user) doLogin(ctx context.Context) bool {
	form := url.Values{"login": {u.login}, "password": {CustomerPassword}}
	resp, ok := u.call(ctx, TxLogin, http.MethodPost, ServiceAuth, "/auth/login", form, nil, nil)
	if !ok {
		return false
	}
	for _, c := range resp.Cookies() {
		if c.Name == jwtCookie {
			u.token = c.Value
		}
	}
	return u.token != ""
}

func (u *user) viewProfile(ctx context.Context) (Customer, bool) {
	var k Customer
	_, ok := u.call(ctx, TxViewProfile, http.MethodGet, ServiceCustomer, "/customer/byid/"+url.PathEscape(u.login), nil, nil, &k)
	return k, ok
}

// updateCustomer sends the profile back with a changed phone number, as
// the script's __updateCustomer does, and the password the update needs.
func (u *user) updateCustomer(ctx context.Context, k Customer) {
	k.Password = CustomerPassword
	k.PhoneNumber = fmt.Sprintf("919-123-%04d", u.rng.IntN(10000))
	body, _ := json.Marshal(k)
	u.call(ctx, TxUpdateCustomer, http.MethodPost, ServiceCustomer, "/customer/byid/"+url.PathEscape(u.login), nil, body, &k)
}

// queryFlight searches a round trip between two random airports, leaving
// today+0..5 and returning today+6..12 (UTC days), and keeps what it found.
func (u *user) queryFlight(ctx context.Context) {
	from := Airports[u.rng.IntN(len(Airports))].Code
	to := Airports[u.rng.IntN(len(Airports))].Code
	today := utcDay(u.d.cfg.Now())
	out := today.AddDate(0, 0, u.rng.IntN(outboundDays))
	ret := today.AddDate(0, 0, returnFirstDay+u.rng.IntN(returnDays))
	form := url.Values{"fromAirport": {from}, "toAirport": {to}, "fromDate": {out.Format(FlightDate)},
		"returnDate": {ret.Format(FlightDate)}, "oneWay": {"false"}}
	var trip TripOptions
	u.found = nil
	if _, ok := u.call(ctx, TxQueryFlight, http.MethodPost, ServiceFlight, "/flight/queryflights", form, nil, &trip); !ok {
		return
	}
	for _, leg := range trip.TripFlights {
		if len(leg.FlightsOptions) == 0 {
			break
		}
		u.found = append(u.found, leg.FlightsOptions[0])
	}
}

// bookFlight books the last search's flights: a round trip when it found
// both legs, else the outbound flight one way.
func (u *user) bookFlight(ctx context.Context) {
	to := u.found[0]
	form := url.Values{"userid": {u.login}, "toFlightId": {to.ID}, "toFlightSegId": {to.FlightSegmentID},
		"oneWayFlight": {"true"}}
	if len(u.found) > 1 {
		ret := u.found[1]
		form.Set("oneWayFlight", "false")
		form.Set("retFlightId", ret.ID)
		form.Set("retFlightSegId", ret.FlightSegmentID)
	}
	var ans BookingAnswer
	u.call(ctx, TxBookFlight, http.MethodPost, ServiceBooking, "/booking/bookflights", form, nil, &ans)
}

func (u *user) listBookings(ctx context.Context) ([]Booking, bool) {
	var list []Booking
	_, ok := u.call(ctx, TxListBookings, http.MethodGet, ServiceBooking, "/booking/byuser/"+url.PathEscape(u.login), nil, nil, &list)
	return list, ok
}

func (u *user) cancelBooking(ctx context.Context, id string) {
	form := url.Values{"number": {id}, "userid": {u.login}}
	u.call(ctx, TxCancelBooking, http.MethodPost, ServiceBooking, "/booking/cancelbooking", form, nil, nil)
}

// call makes one transaction's call and records it. A call cut short by
// the end of the run is not recorded: it measured nothing. A call fails
// when it gets no answer, an answer other than 200, or (when out is
// given) an answer that is not the JSON it should be.
func (u *user) call(ctx context.Context, tx, method, service, path string, form url.Values, body []byte, out any) (*http.Response, bool) {
	var rd io.Reader
	ctype := ""
	switch {
	case form != nil:
		rd, ctype = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
	case body != nil:
		rd, ctype = strings.NewReader(string(body)), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.d.urls[service]+path, rd)
	if err != nil {
		u.d.record(tx, 0, -1)
		return nil, false
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	if u.token != "" {
		req.Header.Set("Authorization", "Bearer "+u.token)
	}
	start := time.Now()
	resp, err := u.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			u.d.record(tx, time.Since(start), -1)
		}
		return nil, false
	}
	defer resp.Body.Close()
	ok := resp.StatusCode == http.StatusOK
	if ok && out != nil {
		err = json.NewDecoder(resp.Body).Decode(out)
		ok = err == nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if ctx.Err() != nil && !ok {
		return resp, false
	}
	code := resp.StatusCode
	if !ok && code == http.StatusOK {
		code = -1 // answered, but not with what the call asked for
	}
	u.d.record(tx, time.Since(start), code)
	return resp, ok
}

func (d *driver) record(tx string, took time.Duration, code int) {
	s := d.tx[tx]
	s.calls.Add(1)
	s.latency.Record(int64(took))
	d.all.Record(int64(took))
	if code != http.StatusOK {
		s.errors.Add(1)
		d.errs.Record(int64(took))
	}
	d.mu.Lock()
	d.codes[code]++
	d.mu.Unlock()
}
