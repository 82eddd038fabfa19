package acmeair

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/results"
)

func TestTheDriverPlaysBluePerfsMixWithoutErrors(t *testing.T) {
	a := startApp(t, 20, "")
	const users = 8
	r, err := Drive(context.Background(), DriverConfig{Users: users, UserIDs: 20, Duration: 3 * time.Second,
		AuthURL: a.urls[ServiceAuth], CustomerURL: a.urls[ServiceCustomer], FlightURL: a.urls[ServiceFlight],
		BookingURL: a.urls[ServiceBooking], Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tx := range r.Transactions {
		names = append(names, tx.Name)
		if tx.Errors != 0 || tx.Count == 0 || tx.RPS <= 0 || !(tx.Latency.P50 > 0 && tx.Latency.P50 <= tx.Latency.P99) {
			t.Errorf("%s: %+v", tx.Name, tx)
		}
	}
	if !slices.Equal(names, Transactions) {
		t.Fatalf("transactions %v, want all of %v", names, Transactions)
	}
	if !maps.Equal(r.RetCodes, map[int]int64{200: r.DurationHistogram.Count}) {
		t.Errorf("codes %v, want only 200s", r.RetCodes)
	}
	// Shares of the reference's mix: per login, 5 rounds of 5 queries, a
	// listing, 25% a profile view and update, and a booking when the last
	// query found a flight.
	share := func(name string) float64 {
		tx, _ := r.Transaction(name)
		return 100 * float64(tx.Count) / float64(r.DurationHistogram.Count)
	}
	for _, c := range []struct {
		name     string
		min, max float64
	}{
		{TxQueryFlight, 55, 80}, {TxListBookings, 9, 17}, {TxLogin, 1.5, 4.5},
		{TxViewProfile, 1.5, 6}, {TxUpdateCustomer, 1.5, 6}, {TxBookFlight, 0.5, 13},
	} {
		if s := share(c.name); s < c.min || s > c.max {
			t.Errorf("%s is %.1f%% of the calls, want %.1f..%.1f%%", c.name, s, c.min, c.max)
		}
	}
	view, _ := r.Transaction(TxViewProfile)
	update, _ := r.Transaction(TxUpdateCustomer)
	if d := view.Count - update.Count; d < 0 || d > users {
		// The end of the run may fall between a user's view and update.
		t.Errorf("%d profile views but %d updates; each view is followed by an update", view.Count, update.Count)
	}

	// The JSON is a Fortio result results reads, with the transactions.
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	run, err := results.FromFortioJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if run.Calls != r.DurationHistogram.Count || run.Errors != 0 || run.Connections != users || run.ActualQPS <= 0 ||
		run.Duration < 3*time.Second || run.StartTime.IsZero() || run.Codes["200"] != run.Calls {
		t.Errorf("read back as %+v", run)
	}
	txs, err := ReadTransactions(b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(txs, r.Transactions) {
		t.Errorf("transactions read back as %+v, want %+v", txs, r.Transactions)
	}
}

func TestTheDriverStopsAfterItsIterations(t *testing.T) {
	a := startApp(t, 20, "")
	r, err := Drive(context.Background(), DriverConfig{Users: 2, UserIDs: 20, Duration: time.Minute, Iterations: 1,
		AuthURL: a.urls[ServiceAuth], CustomerURL: a.urls[ServiceCustomer], FlightURL: a.urls[ServiceFlight],
		BookingURL: a.urls[ServiceBooking]})
	if err != nil {
		t.Fatal(err)
	}
	login, _ := r.Transaction(TxLogin)
	query, _ := r.Transaction(TxQueryFlight)
	if login.Count != 2 || query.Count != 2*innerLoops*queriesPerLoop {
		t.Errorf("%d logins and %d queries; want 2 and %d", login.Count, query.Count, 2*innerLoops*queriesPerLoop)
	}
}

func TestTheDriverCountsFailedLogins(t *testing.T) {
	a := startApp(t, 20, "")
	// Customers uid20.. do not exist: every login is refused and the
	// iteration goes no further.
	r, err := Drive(context.Background(), DriverConfig{Users: 1, UserIDs: 1000, Duration: time.Minute, Iterations: 40,
		AuthURL: a.urls[ServiceAuth], CustomerURL: a.urls[ServiceCustomer], FlightURL: a.urls[ServiceFlight],
		BookingURL: a.urls[ServiceBooking], Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	login, _ := r.Transaction(TxLogin)
	if login.Count != 40 || login.Errors == 0 || r.RetCodes[403] != login.Errors {
		t.Errorf("logins %+v, codes %v; want 40 logins, the refused ones counted as 403 errors", login, r.RetCodes)
	}
	if r.ErrorsDurationHistogram.Count != login.Errors {
		t.Errorf("%d errors in all, want the %d failed logins", r.ErrorsDurationHistogram.Count, login.Errors)
	}
}
