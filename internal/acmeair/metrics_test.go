package acmeair

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/testutil"
)

// Every service counts what it answers and what it calls in isotope's
// service metrics, as the lab reads them; scraping them is not counted.
func TestServicesExportIsotopesMetrics(t *testing.T) {
	a := startApp(t, 20, "")
	scrape := func(service string) *metrics.Snapshot {
		t.Helper()
		s, err := metrics.Scrape(context.Background(), nil, a.urls[service]+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, s := range Services { // counted as nothing
		scrape(s)
	}
	token := a.login(t, CustomerID(1))
	a.login(t, CustomerID(2))
	if code, _, _ := do(t, "POST", a.urls[ServiceAuth]+"/auth/login",
		url.Values{"login": {CustomerID(3)}, "password": {"wrong"}}, ""); code != 403 {
		t.Fatalf("a wrong password: %d, want 403", code)
	}
	f := a.searchOneWay(t, token)
	if code, body, _ := do(t, "POST", a.urls[ServiceBooking]+"/booking/bookflights", url.Values{"userid": {CustomerID(1)},
		"toFlightId": {f.ID}, "toFlightSegId": {f.FlightSegmentID}, "oneWayFlight": {"true"}}, token); code != 200 {
		t.Fatalf("book: %d %s", code, body)
	}
	if code, _, _ := do(t, "GET", a.urls[ServiceBooking]+"/booking/nothing", nil, ""); code != 404 {
		t.Fatalf("an unknown path: %d, want 404", code)
	}
	// Booking adds the miles in the background: flight's getrewardmiles,
	// then customer's updateCustomerTotalMiles.
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := scrape(ServiceCustomer).Sum("service_incoming_requests_total"); n != 4 {
			return fmt.Errorf("customer served %v requests, want 4 (3 validations, 1 miles update)", n)
		}
		return nil
	})

	want := map[string]struct {
		byCode   map[string]float64 // answers by status
		outgoing map[string]float64 // calls by destination_service
	}{
		ServiceAuth:     {map[string]float64{"200": 2, "403": 1}, map[string]float64{ServiceCustomer: 3}},
		ServiceCustomer: {map[string]float64{"200": 4}, map[string]float64{}},
		ServiceFlight:   {map[string]float64{"200": 2}, map[string]float64{}},
		ServiceBooking:  {map[string]float64{"200": 1, "404": 1}, map[string]float64{ServiceFlight: 1, ServiceCustomer: 1}},
		ServiceMain:     {map[string]float64{}, map[string]float64{}},
	}
	for _, s := range Services {
		snap := scrape(s)
		w := want[s]
		total := 0.0
		for _, n := range w.byCode {
			total += n
		}
		if got := snap.Sum("service_incoming_requests_total"); got != total {
			t.Errorf("%s: service_incoming_requests_total %v, want %v", s, got, total)
		}
		if got := nonZero(snap.HistogramCountBy("service_request_duration_seconds", "code")); !maps.Equal(got, w.byCode) {
			t.Errorf("%s: service_request_duration_seconds by code %v, want %v", s, got, w.byCode)
		}
		if got := nonZero(snap.HistogramCountBy("service_response_size", "code")); !maps.Equal(got, w.byCode) {
			t.Errorf("%s: service_response_size by code %v, want %v", s, got, w.byCode)
		}
		if got := snap.By("service_outgoing_requests_total", "destination_service"); !maps.Equal(got, w.outgoing) {
			t.Errorf("%s: service_outgoing_requests_total by destination %v, want %v", s, got, w.outgoing)
		}
		if got := snap.HistogramCountBy("service_outgoing_request_size", "destination_service"); !maps.Equal(got, w.outgoing) {
			t.Errorf("%s: service_outgoing_request_size by destination %v, want %v", s, got, w.outgoing)
		}
	}
	// The buckets are isotope's, as `meshperf service` has them: 7 ms to
	// 500 ms.
	var bounds []float64
	for _, b := range scrape(ServiceAuth).Families["service_request_duration_seconds"].GetMetric()[0].GetHistogram().GetBucket() {
		bounds = append(bounds, b.GetUpperBound())
	}
	if len(bounds) != 33 || bounds[0] != 0.007 || bounds[31] != 0.5 || !math.IsInf(bounds[32], 1) || !slices.IsSorted(bounds) {
		t.Errorf("duration buckets %v: want isotope's, 0.007 to 0.5", bounds)
	}
}

// nonZero drops the series that counted nothing: the 200 and 500 ones
// exist from the start.
func nonZero(m map[string]float64) map[string]float64 {
	maps.DeleteFunc(m, func(_ string, v float64) bool { return v == 0 })
	return m
}
