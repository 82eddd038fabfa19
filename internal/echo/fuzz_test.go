package echo

import (
	"errors"
	"net/url"
	"testing"
)

// FuzzParseEchoParams checks that no query string makes parsing panic, that
// every failure is a client error, and that every plan draws an outcome
// within the limits whatever the roll.
func FuzzParseEchoParams(f *testing.F) {
	for _, s := range []string{
		"", "delay=150us:10,2ms:5", "status=503:0.5,429:1.5", "size=512:20,16384:10",
		"close=true&gzip=50&header=X-A:b", "status=503:50%,200:50%", "delay=1h", "size=-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		p, err := ParseEchoParams(q, testLimits)
		if err != nil {
			if !errors.Is(err, ErrBadParam) {
				t.Fatalf("error %v does not wrap ErrBadParam", err)
			}
			return
		}
		for _, roll := range []float32{0, 0.5, 0.99999994} {
			o := p.Draw(constRoll(roll), true)
			if o.Delay < 0 || o.Delay > testLimits.MaxDelay {
				t.Fatalf("delay %v out of range", o.Delay)
			}
			if o.Size < -1 || o.Size > testLimits.MaxPayloadBytes {
				t.Fatalf("size %d out of range", o.Size)
			}
			if o.Status < 100 || o.Status > 999 {
				t.Fatalf("status %d out of range", o.Status)
			}
		}
	})
}
