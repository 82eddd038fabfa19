package echo

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Limits caps what a client may ask the echo server for, so that a benchmark
// URL cannot make the server sleep for minutes or allocate without bound.
type Limits struct {
	MaxDelay        time.Duration // delay= values above this are lowered to it
	MaxPayloadBytes int           // size= values above this are lowered to it
}

// Weighted is a parsed delay=, status= or size= value: either one value used
// for every request, or a list of values each chosen for a percentage of
// requests, the remainder getting the parameter's default.
type Weighted[T any] struct {
	// Values and Cumulative have the same length. Cumulative[i] is the running
	// sum of the percentages up to and including Values[i], rounded to four
	// decimals as Fortio does so that lists adding up to exactly 100 cover
	// every roll. A single unweighted value has Cumulative = [100].
	Values     []T
	Cumulative []float32
}

// IsSet reports whether the parameter was given at all.
func (w *Weighted[T]) IsSet() bool { return len(w.Values) > 0 }

// pick returns the value for a roll in [0, 100), or def when the roll falls
// past the listed percentages. The first entry whose cumulative percentage is
// at least the roll wins (Fortio compares with <=).
func (w *Weighted[T]) pick(roll float32, def T) T {
	for i, c := range w.Cumulative {
		if roll <= c {
			return w.Values[i]
		}
	}
	return def
}

// fixed reports whether every request gets Values[0], so no roll is needed.
func (w *Weighted[T]) fixed() bool {
	return len(w.Values) == 1 && w.Cumulative[0] >= 100
}

// Chance is a parsed close= or gzip= value: true for Percent% of requests.
type Chance struct {
	Set     bool
	Percent float32 // "true" is 100; values above 100 always, below 0 never
}

// Header is one header=Name:Value parameter, already validated.
type Header struct {
	Name  string // canonical form
	Value string // trimmed
}

// EchoPlan is everything the query string asks of one echo response. It is
// immutable once parsed, so one plan can serve many requests concurrently;
// Draw makes the per-request random choices.
type EchoPlan struct {
	Delay   Weighted[time.Duration] // capped at Limits.MaxDelay; negative is no delay
	Status  Weighted[int]           // HTTP status code, 100-999
	Size    Weighted[int]           // response body bytes, capped; unset echoes the request body
	Close   Chance                  // add "Connection: close" after responding
	Gzip    Chance                  // gzip the body when the client accepts gzip
	Headers []Header                // added to every response

	// sizeHeader[i] is the Content-Length value for Size.Values[i], built
	// once so that size= responses do not format it per request.
	sizeHeader [][]string
}

// contentLength returns the Content-Length header value for size n.
func (p *EchoPlan) contentLength(n int) []string {
	for i, v := range p.Size.Values {
		if v == n && i < len(p.sizeHeader) {
			return p.sizeHeader[i]
		}
	}
	return []string{strconv.Itoa(n)}
}

// Outcome is one request's draw from an EchoPlan.
type Outcome struct {
	Delay  time.Duration // 0 for none
	Status int
	Size   int // -1 echoes the request body
	Close  bool
	Gzip   bool
}

// ErrBadParam is wrapped by every error ParseEchoParams returns, so callers
// can tell a client mistake (answer 400) from anything else.
var ErrBadParam = errors.New("bad echo parameter")

// ParseEchoParams turns the echo query parameters into a plan, applying lim.
// It is a pure function: the random choices are made later by Draw. Values
// Fortio would silently ignore or misread are errors here, so a typo in a
// benchmark URL is seen at once instead of skewing results.
func ParseEchoParams(q url.Values, lim Limits) (EchoPlan, error) {
	var p EchoPlan
	var err error
	if v := q.Get("delay"); v != "" {
		if p.Delay, err = parseWeighted("delay", v, parseDelay(lim.MaxDelay)); err != nil {
			return EchoPlan{}, err
		}
	}
	if v := q.Get("status"); v != "" {
		if p.Status, err = parseWeighted("status", v, parseStatus); err != nil {
			return EchoPlan{}, err
		}
	}
	if v := q.Get("size"); v != "" {
		if p.Size, err = parseWeighted("size", v, parseSize(lim.MaxPayloadBytes)); err != nil {
			return EchoPlan{}, err
		}
	}
	if p.Close, err = parseChance("close", q.Get("close")); err != nil {
		return EchoPlan{}, err
	}
	if p.Gzip, err = parseChance("gzip", q.Get("gzip")); err != nil {
		return EchoPlan{}, err
	}
	if p.Headers, err = parseHeaders(q["header"]); err != nil {
		return EchoPlan{}, err
	}
	for _, n := range p.Size.Values {
		p.sizeHeader = append(p.sizeHeader, []string{strconv.Itoa(n)})
	}
	return p, nil
}

// Draw makes this request's random choices. roll returns a uniform number in
// [0, 1); each parameter that needs chance gets its own roll, as in Fortio.
// acceptsGzip says whether the request's Accept-Encoding mentions gzip; the
// gzip chance is only rolled when it does.
func (p *EchoPlan) Draw(roll func() float32, acceptsGzip bool) Outcome {
	o := Outcome{Status: http.StatusOK, Size: -1}
	if p.Delay.IsSet() {
		o.Delay = drawWeighted(&p.Delay, roll, 0)
	}
	if p.Status.IsSet() {
		o.Status = drawWeighted(&p.Status, roll, http.StatusOK)
	}
	if p.Size.IsSet() {
		o.Size = drawWeighted(&p.Size, roll, -1)
	}
	o.Close = p.Close.draw(roll)
	o.Gzip = acceptsGzip && p.Gzip.draw(roll)
	return o
}

func drawWeighted[T any](w *Weighted[T], roll func() float32, def T) T {
	if w.fixed() {
		return w.Values[0]
	}
	return w.pick(100*roll(), def)
}

func (c Chance) draw(roll func() float32) bool {
	if !c.Set {
		return false
	}
	if c.Percent >= 100 {
		return true
	}
	return 100*roll() <= c.Percent
}

// parseWeighted parses "v" or "v1:p1,v2:p2,..." where the p are percentages
// (an optional trailing % is allowed) whose sum may not pass 100.
func parseWeighted[T any](name, s string, parse func(string) (T, error)) (Weighted[T], error) {
	if !strings.ContainsAny(s, ",:") {
		v, err := parse(s)
		if err != nil {
			return Weighted[T]{}, fmt.Errorf("%w: %s=%q: %w", ErrBadParam, name, s, err)
		}
		return Weighted[T]{Values: []T{v}, Cumulative: []float32{100}}, nil
	}
	n := strings.Count(s, ",") + 1
	w := Weighted[T]{Values: make([]T, 0, n), Cumulative: make([]float32, 0, n)}
	sum := 0.0
	for entry := range strings.SplitSeq(s, ",") {
		val, pct, ok := strings.Cut(entry, ":")
		if !ok || strings.Contains(pct, ":") {
			return Weighted[T]{}, fmt.Errorf("%w: %s=%q: entry %q is not value:percent", ErrBadParam, name, s, entry)
		}
		v, err := parse(val)
		if err != nil {
			return Weighted[T]{}, fmt.Errorf("%w: %s=%q: %w", ErrBadParam, name, s, err)
		}
		p, err := parsePercent(pct)
		if err != nil {
			return Weighted[T]{}, fmt.Errorf("%w: %s=%q: %w", ErrBadParam, name, s, err)
		}
		sum += p
		cum := float32(roundPercent(sum))
		if cum > 100 {
			return Weighted[T]{}, fmt.Errorf("%w: %s=%q: percentages add up to more than 100", ErrBadParam, name, s)
		}
		w.Values = append(w.Values, v)
		w.Cumulative = append(w.Cumulative, cum)
	}
	return w, nil
}

// parsePercent accepts a number in [0, 100] with an optional trailing %.
func parsePercent(s string) (float64, error) {
	p, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 32)
	if err != nil || math.IsNaN(p) || p < 0 || p > 100 {
		return 0, fmt.Errorf("percentage %q is not a number from 0 to 100", s)
	}
	return p, nil
}

// roundPercent rounds to four decimals so that, say, 33.3333+33.3333+33.3334
// is exactly 100 and not a hair above or below it.
func roundPercent(v float64) float64 {
	return math.Floor(v*1e4+0.5) / 1e4
}

func parseDelay(maxDelay time.Duration) func(string) (time.Duration, error) {
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration such as 10ms", s)
		}
		return min(max(d, 0), maxDelay), nil
	}
}

func parseStatus(s string) (int, error) {
	code, err := strconv.Atoi(s)
	// net/http rejects codes outside 100-999 (by panicking), so we must too.
	if err != nil || code < 100 || code > 999 {
		return 0, fmt.Errorf("%q is not an HTTP status code (100-999)", s)
	}
	return code, nil
}

func parseSize(maxBytes int) func(string) (int, error) {
	return func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number of bytes", s)
		}
		// Fortio lowers negative sizes to 0 and large ones to the cap.
		return min(max(n, 0), maxBytes), nil
	}
}

// parseChance reads close= and gzip=: empty or "false" is off, "true" is
// always, a number is a percentage of requests.
func parseChance(name, s string) (Chance, error) {
	switch s {
	case "", "false":
		return Chance{}, nil
	case "true":
		return Chance{Set: true, Percent: 100}, nil
	}
	p, err := strconv.ParseFloat(s, 32)
	if err != nil || math.IsNaN(p) {
		return Chance{}, fmt.Errorf("%w: %s=%q: want true, false or a percentage", ErrBadParam, name, s)
	}
	return Chance{Set: true, Percent: float32(p)}, nil
}

func parseHeaders(values []string) ([]Header, error) {
	var hs []Header
	for _, kv := range values {
		if kv == "" {
			continue // Fortio skips empty header= values
		}
		k, v, ok := strings.Cut(kv, ":")
		v = textproto.TrimString(v)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: header=%q: want Name:Value", ErrBadParam, kv)
		case !httpguts.ValidHeaderFieldName(k):
			return nil, fmt.Errorf("%w: header=%q: %q is not a valid header name", ErrBadParam, kv, k)
		case !httpguts.ValidHeaderFieldValue(v):
			return nil, fmt.Errorf("%w: header=%q: value has control characters", ErrBadParam, kv)
		}
		hs = append(hs, Header{Name: textproto.CanonicalMIMEHeaderKey(k), Value: v})
	}
	return hs, nil
}
