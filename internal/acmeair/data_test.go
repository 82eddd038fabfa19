package acmeair

import (
	"context"
	"maps"
	"testing"
	"time"
)

// rowCounts opens a service's database beside the service and counts rows.
func rowCounts(t *testing.T, dir, service string, tables ...string) map[string]int {
	t.Helper()
	st, err := openStore(dir, service, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ns := map[string]int{}
	for _, tb := range tables {
		if ns[tb], err = st.count(context.Background(), tb); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

func TestTheLoadersLoadAcmeairsDataSetOnce(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2026, 3, 10, 15, 4, 5, 0, time.UTC)
	start := func(name string, now time.Time) {
		s, err := New(context.Background(), Config{Service: name, DataDir: dir, JWTKey: testKey,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	start(ServiceCustomer, day)
	start(ServiceFlight, day)
	routes := len(Routes())
	if routes != 476 {
		t.Errorf("%d routes; want 35 airports to 14 hubs, less the hubs to themselves: 476", routes)
	}
	wantFlights := map[string]int{"airport": len(Airports), "segment": routes, "flight": routes * (DefaultFlightDays + 1), "loaded": 1}
	if got := rowCounts(t, dir, ServiceCustomer, "customer"); got["customer"] != DefaultCustomers {
		t.Errorf("%d customers, want %d", got["customer"], DefaultCustomers)
	}
	if got := rowCounts(t, dir, ServiceFlight, "airport", "segment", "flight", "loaded"); !maps.Equal(got, wantFlights) {
		t.Errorf("flight tables %v, want %v", got, wantFlights)
	}
	// Started again the same day, nothing is loaded twice; the next day,
	// the flights are dated afresh.
	start(ServiceCustomer, day)
	start(ServiceFlight, day.Add(time.Hour))
	if got := rowCounts(t, dir, ServiceCustomer, "customer"); got["customer"] != DefaultCustomers {
		t.Errorf("%d customers after a restart, want %d", got["customer"], DefaultCustomers)
	}
	if got := rowCounts(t, dir, ServiceFlight, "airport", "segment", "flight", "loaded"); !maps.Equal(got, wantFlights) {
		t.Errorf("flight tables after a restart %v, want %v", got, wantFlights)
	}
	start(ServiceFlight, day.AddDate(0, 0, 1))
	st, err := openStore(dir, ServiceFlight, "SELECT 1")
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var first, last string
	if err := st.db.QueryRow("SELECT min(day), max(day) FROM flight").Scan(&first, &last); err != nil {
		t.Fatal(err)
	}
	if first != "2026-03-10" || last != "2026-03-15" {
		t.Errorf("flights from %s to %s the day after; want yesterday (2026-03-10) to today+4 (2026-03-15)", first, last)
	}
}

func TestRouteMilesAreGreatCircleDistances(t *testing.T) {
	byCode := map[string]Airport{}
	for _, a := range Airports {
		byCode[a.Code] = a
	}
	// London to New York is about 3,450 miles; Sydney to Tokyo about 4,860.
	for _, c := range []struct {
		from, to string
		want     int
	}{{"LHR", "JFK", 3450}, {"SYD", "NRT", 4860}} {
		got := greatCircleMiles(byCode[c.from], byCode[c.to])
		if got < c.want*97/100 || got > c.want*103/100 {
			t.Errorf("%s-%s: %d miles, want about %d", c.from, c.to, got, c.want)
		}
	}
}
