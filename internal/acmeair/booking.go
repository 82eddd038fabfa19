package acmeair

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meshperf/meshperf/internal/svcmetrics"
)

// booking books and cancels flights, and keeps the customers' reward miles
// up to date through flight and customer.
type booking struct {
	st      *store
	signer  signer
	log     *slog.Logger
	now     func() time.Time
	rewards *rewardTracker

	insert, byUser, get, remove *sql.Stmt
}

// Booking is one booked flight (the reference app's booking document).
type Booking struct {
	ID              string `json:"_id"`
	CustomerID      string `json:"customerId"`
	FlightID        string `json:"flightId"`
	FlightSegmentID string `json:"flightSegmentId"`
	DateOfBooking   string `json:"dateOfBooking"`
}

// BookingAnswer is bookflights' answer.
type BookingAnswer struct {
	OneWay          bool   `json:"oneWay"`
	DepartBookingID string `json:"departBookingId"`
	ReturnBookingID string `json:"returnBookingId,omitempty"`
}

// RewardCounts are booking's reward updates so far, by outcome, as the
// reference app's /booking/rewards/* count them.
type RewardCounts struct {
	FlightSuccesses, FlightFailures     int64
	CustomerSuccesses, CustomerFailures int64
}

const bookingSchema = `
CREATE TABLE IF NOT EXISTS booking (id TEXT PRIMARY KEY, customer_id TEXT NOT NULL, flight_id TEXT NOT NULL,
	segment_id TEXT NOT NULL, booked TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS booking_customer ON booking (customer_id, booked);`

func newBooking(_ context.Context, cfg Config, m *svcmetrics.Metrics) (*Service, error) {
	st, err := openStore(cfg.DataDir, ServiceBooking, bookingSchema)
	if err != nil {
		return nil, err
	}
	b := &booking{st: st, signer: signer{key: cfg.JWTKey}, log: cfg.Log, now: cfg.Now,
		rewards: newRewardTracker(cfg, m)}
	err = st.prepare(map[**sql.Stmt]string{
		&b.insert: "INSERT INTO booking (id, customer_id, flight_id, segment_id, booked) VALUES (?, ?, ?, ?, ?)",
		&b.byUser: "SELECT id, customer_id, flight_id, segment_id, booked FROM booking WHERE customer_id = ? ORDER BY booked, id",
		&b.get:    "SELECT segment_id FROM booking WHERE id = ? AND customer_id = ?",
		&b.remove: "DELETE FROM booking WHERE id = ? AND customer_id = ?",
	})
	if err != nil {
		st.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /booking/bookflights", b.bookFlights)
	mux.HandleFunc("GET /booking/byuser/{user}", b.listByUser)
	mux.HandleFunc("POST /booking/cancelbooking", b.cancel)
	mux.HandleFunc("GET /booking/status", status)
	mux.HandleFunc("GET /booking/rewards", b.rewardCounts)
	return &Service{name: ServiceBooking, handler: mux, closers: []func() error{st.close, b.rewards.close}}, nil
}

// bookFlights is POST /booking/bookflights (userid, toFlightId,
// toFlightSegId, and unless oneWayFlight is true retFlightId and
// retFlightSegId). It answers once the bookings are stored; the miles
// follow in the background.
func (b *booking) bookFlights(w http.ResponseWriter, r *http.Request) {
	user, ok := b.userForm(w, r)
	if !ok {
		return
	}
	names := []string{"toFlightId", "toFlightSegId"}
	oneWay := r.PostForm.Get("oneWayFlight") == "true"
	if !oneWay {
		names = append(names, "retFlightId", "retFlightSegId")
	}
	v, err := requiredForm(r, names...)
	if err != nil {
		fail(w, b.log, http.StatusBadRequest, err)
		return
	}
	ans := BookingAnswer{OneWay: oneWay}
	if ans.DepartBookingID, err = b.book(r.Context(), user, v[0], v[1]); err != nil {
		fail(w, b.log, http.StatusInternalServerError, err)
		return
	}
	if !oneWay {
		if ans.ReturnBookingID, err = b.book(r.Context(), user, v[2], v[3]); err != nil {
			fail(w, b.log, http.StatusInternalServerError, err)
			return
		}
	}
	writeJSON(w, ans)
}

func (b *booking) book(ctx context.Context, user, flightID, segmentID string) (string, error) {
	id := newBookingID()
	if _, err := b.insert.ExecContext(ctx, id, user, flightID, segmentID, b.now().UTC().Format(time.RFC3339Nano)); err != nil {
		return "", fmt.Errorf("store booking: %w", err)
	}
	b.rewards.update(user, segmentID, true)
	return id, nil
}

// newBookingID is a random id, as the reference app's UUIDs.
func newBookingID() string {
	var r [16]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// userForm reads a booking call's form and checks that its userid is the
// token's; it answers the call and returns false when it may not go on.
func (b *booking) userForm(w http.ResponseWriter, r *http.Request) (string, bool) {
	if err := readForm(w, r); err != nil {
		fail(w, b.log, http.StatusBadRequest, err)
		return "", false
	}
	user := r.PostForm.Get("userid")
	return user, authorize(w, r, b.signer, user)
}

// listByUser is GET /booking/byuser/{user}: the user's bookings, oldest
// first.
func (b *booking) listByUser(w http.ResponseWriter, r *http.Request) {
	user := r.PathValue("user")
	if !authorize(w, r, b.signer, user) {
		return
	}
	rows, err := b.byUser.QueryContext(r.Context(), user)
	if err != nil {
		fail(w, b.log, http.StatusInternalServerError, err)
		return
	}
	defer rows.Close()
	list := []Booking{}
	for rows.Next() {
		var k Booking
		if err := rows.Scan(&k.ID, &k.CustomerID, &k.FlightID, &k.FlightSegmentID, &k.DateOfBooking); err != nil {
			fail(w, b.log, http.StatusInternalServerError, err)
			return
		}
		list = append(list, k)
	}
	if err := rows.Err(); err != nil {
		fail(w, b.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, list)
}

// cancel is POST /booking/cancelbooking (number, userid). A booking
// already gone is answered as deleted, as the reference app answers it.
func (b *booking) cancel(w http.ResponseWriter, r *http.Request) {
	user, ok := b.userForm(w, r)
	if !ok {
		return
	}
	v, err := requiredForm(r, "number")
	if err != nil {
		fail(w, b.log, http.StatusBadRequest, err)
		return
	}
	var segment string
	err = b.get.QueryRowContext(r.Context(), v[0], user).Scan(&segment)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		fail(w, b.log, http.StatusInternalServerError, err)
		return
	default:
		res, err := b.remove.ExecContext(r.Context(), v[0], user)
		if err != nil {
			fail(w, b.log, http.StatusInternalServerError, err)
			return
		}
		// Two cancels of one booking at once: only the one that deleted
		// it takes the miles back.
		if n, _ := res.RowsAffected(); n == 1 {
			b.rewards.update(user, segment, false)
		}
	}
	writeText(w, "booking "+v[0]+" deleted.")
}

// rewardCounts is GET /booking/rewards: the reward updates by outcome.
func (b *booking) rewardCounts(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, b.rewards.counts())
}

// rewardTracker adds a booked segment's miles to its customer (or takes a
// cancelled one's back) in the background: flight says how many, customer
// adds them. Each update is bounded by the timeout, and a failure is
// counted, not reported to the user, as in the reference app.
type rewardTracker struct {
	client              *http.Client // flight's and customer's
	flight, customer    peer
	flightURL, custURL  string
	timeout             time.Duration
	log                 *slog.Logger
	wg                  sync.WaitGroup
	flightOK, flightErr atomic.Int64
	custOK, custErr     atomic.Int64
}

func newRewardTracker(cfg Config, m *svcmetrics.Metrics) *rewardTracker {
	c := peerClient(cfg, cfg.RewardTimeout)
	return &rewardTracker{
		client:    c,
		flight:    newPeer(c, m, ServiceFlight),
		customer:  newPeer(c, m, ServiceCustomer),
		flightURL: orDefault(cfg.FlightURL, ServiceFlight) + "/flight/getrewardmiles",
		custURL:   orDefault(cfg.CustomerURL, ServiceCustomer) + "/customer/internal/updateCustomerTotalMiles/",
		timeout:   cfg.RewardTimeout,
		log:       cfg.Log,
	}
}

func (t *rewardTracker) update(user, segment string, add bool) {
	t.wg.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		defer cancel()
		var m milesAnswer
		if err := t.flight.postForm(ctx, t.flightURL, url.Values{"flightSegment": {segment}}, &m); err != nil {
			t.flightErr.Add(1)
			t.log.Debug("reward miles from flight", "segment", segment, "err", err)
			return
		}
		t.flightOK.Add(1)
		if !add {
			m.Miles = -m.Miles
		}
		u := t.custURL + url.PathEscape(user)
		if err := t.customer.postForm(ctx, u, url.Values{"miles": {strconv.FormatInt(m.Miles, 10)}}, &m); err != nil {
			t.custErr.Add(1)
			t.log.Debug("reward miles to customer", "user", user, "err", err)
			return
		}
		t.custOK.Add(1)
	})
}

func (t *rewardTracker) counts() RewardCounts {
	return RewardCounts{FlightSuccesses: t.flightOK.Load(), FlightFailures: t.flightErr.Load(),
		CustomerSuccesses: t.custOK.Load(), CustomerFailures: t.custErr.Load()}
}

// close waits for the updates under way: each ends within the timeout.
func (t *rewardTracker) close() error {
	t.wg.Wait()
	t.client.CloseIdleConnections()
	return nil
}
