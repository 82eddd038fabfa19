package acmeair

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// flight holds the route table and the flights, answers flight searches
// and tells booking how many miles a segment is worth.
type flight struct {
	st     *store
	signer signer
	log    *slog.Logger

	search, miles *sql.Stmt
}

// Flight is one flight with its segment, as queryflights lists it.
type Flight struct {
	ID                     string  `json:"_id"`
	FirstClassBaseCost     int     `json:"firstClassBaseCost"`
	EconomyClassBaseCost   int     `json:"economyClassBaseCost"`
	NumFirstClassSeats     int     `json:"numFirstClassSeats"`
	NumEconomyClassSeats   int     `json:"numEconomyClassSeats"`
	AirplaneTypeID         string  `json:"airplaneTypeId"`
	FlightSegmentID        string  `json:"flightSegmentId"`
	ScheduledDepartureTime string  `json:"scheduledDepartureTime"`
	ScheduledArrivalTime   string  `json:"scheduledArrivalTime"`
	FlightSegment          Segment `json:"flightSegment"`
}

// Segment is a route: the reference app's flight segment.
type Segment struct {
	ID         string `json:"_id"`
	OriginPort string `json:"originPort"`
	DestPort   string `json:"destPort"`
	Miles      int    `json:"miles"`
}

// TripOptions is queryflights' answer: one list of flights per leg.
type TripOptions struct {
	TripFlights []FlightOptions `json:"tripFlights"`
	TripLegs    int             `json:"tripLegs"`
}

// FlightOptions is one leg's flights, in the reference app's one page.
type FlightOptions struct {
	NumPages       int      `json:"numPages"`
	FlightsOptions []Flight `json:"flightsOptions"`
	CurrentPage    int      `json:"currentPage"`
	HasMoreOptions bool     `json:"hasMoreOptions"`
	PageSize       int      `json:"pageSize"`
}

const flightSchema = `
CREATE TABLE IF NOT EXISTS airport (code TEXT PRIMARY KEY, name TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS segment (id TEXT PRIMARY KEY, origin TEXT NOT NULL, dest TEXT NOT NULL, miles INTEGER NOT NULL);
CREATE UNIQUE INDEX IF NOT EXISTS segment_ports ON segment (origin, dest);
CREATE TABLE IF NOT EXISTS flight (id TEXT PRIMARY KEY, segment_id TEXT NOT NULL, day TEXT NOT NULL,
	departure TEXT NOT NULL, arrival TEXT NOT NULL, first_class_cost INTEGER NOT NULL,
	economy_class_cost INTEGER NOT NULL, first_class_seats INTEGER NOT NULL,
	economy_class_seats INTEGER NOT NULL, airplane TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS flight_segment_day ON flight (segment_id, day);
CREATE TABLE IF NOT EXISTS loaded (day TEXT NOT NULL);`

func newFlight(ctx context.Context, cfg Config) (*Service, error) {
	st, err := openStore(cfg.DataDir, ServiceFlight, flightSchema)
	if err != nil {
		return nil, err
	}
	f := &flight{st: st, signer: signer{key: cfg.JWTKey}, log: cfg.Log}
	if err := f.load(ctx, utcDay(cfg.Now()), cfg.FlightDays); err != nil {
		st.close()
		return nil, err
	}
	err = st.prepare(map[**sql.Stmt]string{
		&f.search: `SELECT f.id, f.first_class_cost, f.economy_class_cost, f.first_class_seats,
			f.economy_class_seats, f.airplane, f.departure, f.arrival, s.id, s.origin, s.dest, s.miles
			FROM segment s JOIN flight f ON f.segment_id = s.id
			WHERE s.origin = ? AND s.dest = ? AND f.day = ? ORDER BY f.departure`,
		&f.miles: "SELECT miles FROM segment WHERE id = ?",
	})
	if err != nil {
		st.close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /flight/queryflights", f.queryFlights)
	mux.HandleFunc("POST /flight/getrewardmiles", f.rewardMiles)
	mux.HandleFunc("GET /flight/status", status)
	return &Service{name: ServiceFlight, handler: mux, closers: []func() error{st.close}}, nil
}

// load (re)loads the flights when the database holds none or holds
// another day's: flights are dated from the day they were loaded, and a
// database kept from yesterday would answer today's searches a day short.
func (f *flight) load(ctx context.Context, today time.Time, days int) error {
	var day string
	err := f.st.db.QueryRowContext(ctx, "SELECT day FROM loaded").Scan(&day)
	if err == nil && day == today.Format(time.DateOnly) {
		return nil
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("read the flights' day: %w", err)
	}
	if err := loadFlights(ctx, f.st.db, today, days); err != nil {
		return fmt.Errorf("load flights: %w", err)
	}
	f.log.Info("loaded flights", "routes", len(Routes()), "days", days+1)
	return nil
}

// queryFlights is POST /flight/queryflights (fromAirport, toAirport,
// fromDate, returnDate, oneWay): the flights of each leg on its day.
// The reference app lets anyone search; here a search needs a login (any
// user's token), so that every user-facing call costs a token check.
func (f *flight) queryFlights(w http.ResponseWriter, r *http.Request) {
	if _, err := f.signer.subject(r); err != nil {
		http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
		return
	}
	if err := readForm(w, r); err != nil {
		fail(w, f.log, http.StatusBadRequest, err)
		return
	}
	v, err := requiredForm(r, "fromAirport", "toAirport", "fromDate")
	if err != nil {
		fail(w, f.log, http.StatusBadRequest, err)
		return
	}
	from, to := v[0], v[1]
	fromDay, err := ParseFlightDate(v[2])
	if err != nil {
		fail(w, f.log, http.StatusBadRequest, fmt.Errorf("fromDate: %w", err))
		return
	}
	oneWay := r.PostForm.Get("oneWay") == "true"
	var retDay time.Time
	if !oneWay {
		if retDay, err = ParseFlightDate(r.PostForm.Get("returnDate")); err != nil {
			fail(w, f.log, http.StatusBadRequest, fmt.Errorf("returnDate: %w", err))
			return
		}
	}
	out := TripOptions{TripLegs: 1}
	legs := []struct {
		from, to string
		day      time.Time
	}{{from, to, fromDay}}
	if !oneWay {
		out.TripLegs = 2
		legs = append(legs, struct {
			from, to string
			day      time.Time
		}{to, from, retDay})
	}
	for _, l := range legs {
		flights, err := f.find(r.Context(), l.from, l.to, l.day)
		if err != nil {
			fail(w, f.log, http.StatusInternalServerError, err)
			return
		}
		out.TripFlights = append(out.TripFlights, FlightOptions{NumPages: 1, FlightsOptions: flights, PageSize: 10})
	}
	writeJSON(w, out)
}

func (f *flight) find(ctx context.Context, from, to string, day time.Time) ([]Flight, error) {
	rows, err := f.search.QueryContext(ctx, from, to, day.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	flights := []Flight{}
	for rows.Next() {
		var x Flight
		s := &x.FlightSegment
		if err := rows.Scan(&x.ID, &x.FirstClassBaseCost, &x.EconomyClassBaseCost, &x.NumFirstClassSeats,
			&x.NumEconomyClassSeats, &x.AirplaneTypeID, &x.ScheduledDepartureTime, &x.ScheduledArrivalTime,
			&s.ID, &s.OriginPort, &s.DestPort, &s.Miles); err != nil {
			return nil, err
		}
		x.FlightSegmentID = s.ID
		flights = append(flights, x)
	}
	return flights, rows.Err()
}

// rewardMiles is POST /flight/getrewardmiles (flightSegment): booking's
// call per booked or cancelled segment.
func (f *flight) rewardMiles(w http.ResponseWriter, r *http.Request) {
	if err := readForm(w, r); err != nil {
		fail(w, f.log, http.StatusBadRequest, err)
		return
	}
	v, err := requiredForm(r, "flightSegment")
	if err != nil {
		fail(w, f.log, http.StatusBadRequest, err)
		return
	}
	var m milesAnswer
	err = f.miles.QueryRowContext(r.Context(), v[0]).Scan(&m.Miles)
	if errors.Is(err, sql.ErrNoRows) {
		http.Error(w, "no flight segment "+v[0], http.StatusNotFound)
		return
	}
	if err != nil {
		fail(w, f.log, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, m)
}

// FlightDate is how the driver writes a search's dates: Java's
// Date.toString at midnight, as the reference JMeter script sends them.
const FlightDate = "Mon Jan 02 15:04:05 MST 2006"

// ParseFlightDate reads a search's date as the reference app does: JMeter's
// "Mon Jan 02 00:00:00 UTC 2006" or a browser's "Mon Jan 02 2006" (the
// zone and time are dropped: a date is a day), or an ISO 2006-01-02.
func ParseFlightDate(s string) (time.Time, error) {
	f := strings.Fields(s)
	switch {
	case len(f) == 6:
		s = f[0] + " " + f[1] + " " + f[2] + " " + f[5]
	case len(f) == 4:
	case len(f) == 1:
		if t, err := time.Parse(time.DateOnly, f[0]); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("%q is not a date like %q or 2006-01-02", s, FlightDate)
	default:
		return time.Time{}, fmt.Errorf("%q is not a date like %q or 2006-01-02", s, FlightDate)
	}
	t, err := time.Parse("Mon Jan 02 2006", s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is not a date like %q or 2006-01-02", strings.Join(f, " "), FlightDate)
	}
	return t, nil
}
