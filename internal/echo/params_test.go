package echo

import (
	"errors"
	"net/url"
	"slices"
	"testing"
	"time"
)

var testLimits = Limits{MaxDelay: 1500 * time.Millisecond, MaxPayloadBytes: 256 * 1024}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	q, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatalf("ParseQuery(%q): %v", raw, err)
	}
	return q
}

// constRoll returns a roll source that always yields v (in [0, 1)).
func constRoll(v float32) func() float32 { return func() float32 { return v } }

func TestParseEchoParamsOutcomes(t *testing.T) {
	tests := []struct {
		query  string
		roll   float32
		gzipOK bool
		want   Outcome
	}{
		{"", 0.5, false, Outcome{Status: 200, Size: -1}},
		{"delay=10ms", 0.5, false, Outcome{Delay: 10 * time.Millisecond, Status: 200, Size: -1}},
		{"delay=1h", 0.5, false, Outcome{Delay: 1500 * time.Millisecond, Status: 200, Size: -1}}, // capped
		{"delay=-5ms", 0.5, false, Outcome{Status: 200, Size: -1}},
		{"delay=150us:10,2ms:5", 0.05, false, Outcome{Delay: 150 * time.Microsecond, Status: 200, Size: -1}},
		{"delay=150us:10,2ms:5", 0.12, false, Outcome{Delay: 2 * time.Millisecond, Status: 200, Size: -1}},
		{"delay=150us:10,2ms:5", 0.5, false, Outcome{Status: 200, Size: -1}},
		{"status=503", 0.99, false, Outcome{Status: 503, Size: -1}},
		{"status=503:0.5,429:1.5", 0.004, false, Outcome{Status: 503, Size: -1}},
		{"status=503:0.5,429:1.5", 0.015, false, Outcome{Status: 429, Size: -1}},
		{"status=503:0.5,429:1.5", 0.021, false, Outcome{Status: 200, Size: -1}},
		{"status=503:50%25,429:50%25", 0.99, false, Outcome{Status: 429, Size: -1}}, // 50%,50%
		{"size=1024", 0.5, false, Outcome{Status: 200, Size: 1024}},
		{"size=0", 0.5, false, Outcome{Status: 200, Size: 0}},
		{"size=-3", 0.5, false, Outcome{Status: 200, Size: 0}},
		{"size=99999999", 0.5, false, Outcome{Status: 200, Size: 256 * 1024}},
		{"size=512:20,16384:10", 0.25, false, Outcome{Status: 200, Size: 16384}},
		{"size=512:20,16384:10", 0.35, false, Outcome{Status: 200, Size: -1}},
		{"close=true", 0.99, false, Outcome{Status: 200, Size: -1, Close: true}},
		{"close=false", 0, false, Outcome{Status: 200, Size: -1}},
		{"close=10", 0.05, false, Outcome{Status: 200, Size: -1, Close: true}},
		{"close=10", 0.5, false, Outcome{Status: 200, Size: -1}},
		{"gzip=true", 0.5, false, Outcome{Status: 200, Size: -1}}, // client does not accept gzip
		{"gzip=true", 0.5, true, Outcome{Status: 200, Size: -1, Gzip: true}},
		{"gzip=42.3", 0.423, true, Outcome{Status: 200, Size: -1, Gzip: true}},
		{"gzip=42.3", 0.43, true, Outcome{Status: 200, Size: -1}},
		{"status=418&size=10&delay=1ms&close=100", 0.5, false,
			Outcome{Delay: time.Millisecond, Status: 418, Size: 10, Close: true}},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			p, err := ParseEchoParams(mustQuery(t, tc.query), testLimits)
			if err != nil {
				t.Fatalf("ParseEchoParams: %v", err)
			}
			if got := p.Draw(constRoll(tc.roll), tc.gzipOK); got != tc.want {
				t.Errorf("Draw(roll=%v) = %+v, want %+v", tc.roll, got, tc.want)
			}
		})
	}
}

// Percentages that add up to exactly 100 must cover every roll, including
// the largest float32 below 1 (a regression Fortio fixed by rounding).
func TestWeightedSumsToHundred(t *testing.T) {
	p, err := ParseEchoParams(mustQuery(t, "status=500:33.3333,501:33.3333,502:33.3334"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Draw(constRoll(0.99999994), false).Status; got != 502 {
		t.Errorf("status at top roll = %d, want 502", got)
	}
	if got := p.Status.Cumulative[2]; got != 100 {
		t.Errorf("cumulative = %v, want exactly 100", got)
	}
}

func TestParseHeaders(t *testing.T) {
	p, err := ParseEchoParams(mustQuery(t, "header=x-a:1&header=&header=X-B:+two+&header=x-a:3"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := []Header{{"X-A", "1"}, {"X-B", "two"}, {"X-A", "3"}}
	if !slices.Equal(p.Headers, want) {
		t.Errorf("headers = %+v, want %+v", p.Headers, want)
	}
}

func TestParseEchoParamsErrors(t *testing.T) {
	bad := []string{
		"delay=abc", "delay=10", "delay=1ms:10,foo", "delay=1ms:10:3", "delay=1ms:x",
		"status=abc", "status=99", "status=1000", "status=503:", "status=503:101",
		"status=503:60,429:50", "status=503:-1", "status=503:NaN", "status=,",
		"size=big", "size=1k", "size=10:20,",
		"close=yes", "close=NaN", "gzip=maybe",
		"header=NoColon", "header=bad name:v", "header=k:v%0Aevil",
	}
	for _, raw := range bad {
		t.Run(raw, func(t *testing.T) {
			_, err := ParseEchoParams(mustQuery(t, raw), testLimits)
			if !errors.Is(err, ErrBadParam) {
				t.Fatalf("err = %v, want ErrBadParam", err)
			}
			for _, c := range err.Error() {
				if c == '\n' || c == '\r' {
					t.Fatalf("error message is not one line: %q", err)
				}
			}
		})
	}
}

func TestDebugSummary(t *testing.T) {
	if got := DebugSummary([]byte("a\nb"), 512); got != `a\nb` {
		t.Errorf("short = %q", got)
	}
	long := make([]byte, 600)
	for i := range long {
		long[i] = 'x'
	}
	long[0], long[599] = 'A', 'Z'
	got := DebugSummary(long, 8)
	if want := "600: Axxx...xxxZ"; got != want {
		t.Errorf("long = %q, want %q", got, want)
	}
}
