package acmeair

import (
	"bytes"
	"net/http"
	"testing"
	"time"
)

func FuzzParseFlightDate(f *testing.F) {
	for _, s := range []string{"Tue Mar 10 00:00:00 UTC 2026", "Tue Mar 10 2026", "2026-03-10", "", "Tue Mar 10",
		"Xyz Foo 99 00:00:00 UTC 2026", "Tue Mar 10 00:00:00 UTC -1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseFlightDate(s)
		if err != nil {
			return
		}
		// A date read is a day, and written the driver's way reads back as
		// the same day.
		if d != utcDay(d) {
			t.Fatalf("%q read as %v, not a day", s, d)
		}
		again, err := ParseFlightDate(d.Format(FlightDate))
		if err != nil || !again.Equal(d) {
			t.Fatalf("%q read as %v, written as %q, read back as %v (%v)", s, d, d.Format(FlightDate), again, err)
		}
	})
}

func TestParseFlightDateReadsJMetersAndBrowsersDates(t *testing.T) {
	want := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	for _, s := range []string{"Tue Mar 10 00:00:00 UTC 2026", "Tue Mar 10 00:00:00 EST 2026", "Tue Mar 10 2026", "2026-03-10"} {
		if d, err := ParseFlightDate(s); err != nil || !d.Equal(want) {
			t.Errorf("%q: %v, %v; want %v", s, d, err, want)
		}
	}
	for _, s := range []string{"", "Tue Mar 10", "tomorrow", "Tue Mar 32 2026", "2026-13-01"} {
		if _, err := ParseFlightDate(s); err == nil {
			t.Errorf("%q read as a date", s)
		}
	}
}

func FuzzDecodeCustomer(f *testing.F) {
	f.Add([]byte(`{"_id":"uid1@email.com","password":"password","status":"GOLD","total_miles":3,"miles_ytd":0,"address":{"streetAddress1":"1 Main St.","streetAddress2":null,"city":"A","stateProvince":"NC","country":"USA","postalCode":"1"},"phoneNumber":"1","phoneNumberType":"BUSINESS"}`))
	f.Add([]byte(`{"_id":""}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := decodeCustomer(bytes.NewReader(b))
		if err == nil && (k.ID == "" || k.Password == "" || k.Status == "") {
			t.Fatalf("%q decoded without a required field: %+v", b, k)
		}
	})
}

// FuzzTokenCheck: only what the key signed passes (base64's spare bits
// may spell the one signed token more than one way).
func FuzzTokenCheck(f *testing.F) {
	s := signer{key: testKey}
	good, err := s.issue(CustomerID(1), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:len(good)-2] + "xx")
	f.Add("a.b.c")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		r, _ := http.NewRequest("GET", "http://customer/customer/byid/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		sub, err := s.subject(r)
		if err == nil && sub != CustomerID(1) {
			t.Fatalf("token %q accepted for %q", token, sub)
		}
	})
}
