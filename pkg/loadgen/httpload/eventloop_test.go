package httpload

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/meshperf/meshperf/pkg/loadgen"
)

// A run with no duration (Fortio's -t 0) on the event loop goes until it is
// interrupted, then reports what it measured.
func TestEventLoopRunsUntilInterrupted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	l, err := New(Options{URL: srv.URL + "/"}, loadgen.Options{QPS: 200, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	r, err := l.Run(ctx, loadgen.Describe{Percentiles: []float64{50}})
	if err != nil {
		t.Fatal(err)
	}
	if n := r.RetCodes[200]; n < 10 || n > 82 || len(r.RetCodes) != 1 {
		t.Errorf("codes %v after ~0.4 s at 200 qps", r.RetCodes)
	}
	if r.RequestedDuration != "until stopped" || r.ActualDuration <= 0 || r.ActualDuration > time.Second {
		t.Errorf("RequestedDuration %q, ActualDuration %v", r.RequestedDuration, r.ActualDuration)
	}
	if r.SocketCount != 2 {
		t.Errorf("%d sockets for 2 connections", r.SocketCount)
	}
}
