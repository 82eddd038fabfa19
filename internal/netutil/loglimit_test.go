package netutil

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// A client repeating one refused request logs one line per interval, each
// saying how many were left out since the last; another kind of event is
// not held back by the first.
func TestLogLimiterLogsOneLinePerKindPerInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		l := NewLogLimiter(slog.New(slog.NewTextHandler(&buf, nil)), 5*time.Second)
		lines := func() []string {
			out := strings.Split(strings.TrimSpace(buf.String()), "\n")
			buf.Reset()
			if len(out) == 1 && out[0] == "" {
				return nil
			}
			return out
		}

		for range 1000 {
			l.Warn("garbage", "garbage connection", "peer", "127.0.0.1:1")
		}
		if got := lines(); len(got) != 1 || !strings.Contains(got[0], "suppressed=0") {
			t.Fatalf("1000 events at once logged %q, want one line with suppressed=0", got)
		}
		if !l.Warn("handshake", "TLS handshake failed") {
			t.Error("another kind of event was held back by the first")
		}
		lines()

		time.Sleep(4 * time.Second)
		l.Warn("garbage", "garbage connection")
		if got := lines(); len(got) != 0 {
			t.Fatalf("logged again within the interval: %q", got)
		}
		time.Sleep(time.Second)
		if !l.Warn("garbage", "garbage connection") {
			t.Fatal("nothing logged once the interval had passed")
		}
		if got := lines(); len(got) != 1 || !strings.Contains(got[0], "suppressed=1000") {
			t.Errorf("after the interval: %q, want one line with suppressed=1000 (999 + 1)", got)
		}
		time.Sleep(time.Minute)
		l.Warn("garbage", "garbage connection")
		if got := lines(); len(got) != 1 || !strings.Contains(got[0], "suppressed=0") {
			t.Errorf("after a quiet minute: %q, want suppressed=0", got)
		}
	})
}
