package acmeair

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"time"
)

// The standard data set, as Acmeair's loaders make it: customers
// uid0@email.com .. uidN-1@email.com with password "password", and for
// every route one flight a day from yesterday to the loader's last day.
const (
	// DefaultCustomers is how many customers the reference loader loads.
	DefaultCustomers = 10000
	// DefaultFlightDays is the reference loader's NUM_DAYS_TO_LOAD: flights
	// leave on days -1 .. DefaultFlightDays-1 from the day of loading.
	DefaultFlightDays = 5
	// CustomerPassword is every loaded customer's password.
	CustomerPassword = "password"
)

// CustomerID is the login of the customer with number n.
func CustomerID(n int) string { return "uid" + strconv.Itoa(n) + "@email.com" }

// Airport is one airport of the route table.
type Airport struct {
	Code, Name string
	Lat, Lon   float64 // degrees
	Hub        bool    // every airport has a route to every hub
}

// Airports is the route table: as in Acmeair's, a set of hubs and the
// airports that fly to them; distances are great-circle miles between the
// airports' coordinates.
var Airports = []Airport{
	{"BOM", "Mumbai", 19.09, 72.87, true},
	{"DEL", "Delhi", 28.56, 77.10, true},
	{"FRA", "Frankfurt", 50.03, 8.57, true},
	{"HKG", "Hong Kong", 22.31, 113.92, true},
	{"LHR", "London", 51.47, -0.45, true},
	{"YUL", "Montreal", 45.47, -73.74, true},
	{"SVO", "Moscow", 55.97, 37.41, true},
	{"JFK", "New York", 40.64, -73.78, true},
	{"CDG", "Paris", 49.01, 2.55, true},
	{"FCO", "Rome", 41.80, 12.25, true},
	{"SIN", "Singapore", 1.36, 103.99, true},
	{"SYD", "Sydney", -33.95, 151.18, true},
	{"IKA", "Tehran", 35.42, 51.15, true},
	{"NRT", "Tokyo", 35.77, 140.39, true},
	{"AMS", "Amsterdam", 52.31, 4.76, false},
	{"AKL", "Auckland", -37.01, 174.79, false},
	{"BKK", "Bangkok", 13.69, 100.75, false},
	{"BRU", "Brussels", 50.90, 4.48, false},
	{"CAI", "Cairo", 30.12, 31.41, false},
	{"DUB", "Dublin", 53.42, -6.27, false},
	{"GVA", "Geneva", 46.24, 6.11, false},
	{"IST", "Istanbul", 41.26, 28.74, false},
	{"KHI", "Karachi", 24.91, 67.16, false},
	{"KWI", "Kuwait", 29.24, 47.97, false},
	{"LOS", "Lagos", 6.58, 3.32, false},
	{"MAD", "Madrid", 40.47, -3.56, false},
	{"MEX", "Mexico City", 19.44, -99.07, false},
	{"MIA", "Miami", 25.79, -80.29, false},
	{"ORD", "Chicago", 41.98, -87.90, false},
	{"LAX", "Los Angeles", 33.94, -118.41, false},
	{"PEK", "Beijing", 40.08, 116.58, false},
	{"GRU", "Sao Paulo", -23.43, -46.47, false},
	{"YYZ", "Toronto", 43.68, -79.63, false},
	{"JNB", "Johannesburg", -26.14, 28.24, false},
	{"ARN", "Stockholm", 59.65, 17.92, false},
}

// Route is one flight segment: a numbered one-way route between airports.
type Route struct {
	ID         string // "AA12"
	From, To   string
	Miles      int
	Departures int // flights a day
}

// Routes is the route table's segments: every airport to every hub but
// itself, numbered in table order as Acmeair numbers its segments.
func Routes() []Route {
	var rs []Route
	for _, from := range Airports {
		for _, to := range Airports {
			if !to.Hub || to.Code == from.Code {
				continue
			}
			rs = append(rs, Route{ID: "AA" + strconv.Itoa(len(rs)), From: from.Code, To: to.Code,
				Miles: greatCircleMiles(from, to), Departures: 1})
		}
	}
	return rs
}

// greatCircleMiles is the haversine distance between two airports.
func greatCircleMiles(a, b Airport) int {
	const earthRadiusMiles = 3958.8
	rad := func(d float64) float64 { return d * math.Pi / 180 }
	dLat, dLon := rad(b.Lat-a.Lat), rad(b.Lon-a.Lon)
	h := math.Sin(dLat/2)*math.Sin(dLat/2) +
		math.Cos(rad(a.Lat))*math.Cos(rad(b.Lat))*math.Sin(dLon/2)*math.Sin(dLon/2)
	return int(math.Round(2 * earthRadiusMiles * math.Asin(math.Sqrt(h))))
}

// flightDuration is the reference loader's: 600 miles an hour.
func flightDuration(miles int) time.Duration {
	return time.Duration(float64(miles) / 600 * float64(time.Hour)).Truncate(time.Minute)
}

// loadCustomers inserts n customers in one transaction, so that 10,000
// take a moment rather than 10,000 fsyncs.
func loadCustomers(ctx context.Context, db *sql.DB, n int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT INTO customer (id, password, status, total_miles, miles_ytd,
		street1, street2, city, state, country, postal_code, phone, phone_type)
		VALUES (?, ?, 'GOLD', 0, 0, '123 Main St.', NULL, 'Anytown', 'NC', 'USA', '27617', '919-123-4567', 'BUSINESS')`)
	if err != nil {
		return err
	}
	for i := range n {
		if _, err := ins.ExecContext(ctx, CustomerID(i), CustomerPassword); err != nil {
			return fmt.Errorf("load customer %d: %w", i, err)
		}
	}
	return tx.Commit()
}

// loadFlights replaces the airports, segments and flights with the route
// table's, flights leaving at midnight UTC on days -1 .. days-1 from today.
func loadFlights(ctx context.Context, db *sql.DB, today time.Time, days int) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range []string{"airport", "segment", "flight", "loaded"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			return err
		}
	}
	for _, a := range Airports {
		if _, err := tx.ExecContext(ctx, "INSERT INTO airport (code, name) VALUES (?, ?)", a.Code, a.Name); err != nil {
			return err
		}
	}
	insSeg, err := tx.PrepareContext(ctx, "INSERT INTO segment (id, origin, dest, miles) VALUES (?, ?, ?, ?)")
	if err != nil {
		return err
	}
	insFlight, err := tx.PrepareContext(ctx, `INSERT INTO flight (id, segment_id, day, departure, arrival,
		first_class_cost, economy_class_cost, first_class_seats, economy_class_seats, airplane)
		VALUES (?, ?, ?, ?, ?, 500, 200, 10, 200, 'B747')`)
	if err != nil {
		return err
	}
	for _, r := range Routes() {
		if _, err := insSeg.ExecContext(ctx, r.ID, r.From, r.To, r.Miles); err != nil {
			return err
		}
		for d := -1; d < days; d++ {
			dep := today.AddDate(0, 0, d)
			day := dep.Format(time.DateOnly)
			for k := range r.Departures {
				id := r.ID + "-" + day + "-" + strconv.Itoa(k)
				if _, err := insFlight.ExecContext(ctx, id, r.ID, day, dep.Format(time.RFC3339),
					dep.Add(flightDuration(r.Miles)).Format(time.RFC3339)); err != nil {
					return err
				}
			}
		}
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO loaded (day) VALUES (?)", today.Format(time.DateOnly)); err != nil {
		return err
	}
	return tx.Commit()
}

// utcDay is t's day at midnight UTC: flights are dated in UTC, so that a
// driver and services in different time zones agree on what "today" is.
func utcDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}
