package echo

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

// The benchmarks call the handler directly, so they measure the echo
// server's own per-request work, not the network or net/http's parsing.

func benchHandler(b *testing.B, target string) {
	h := New(Config{}).Handler()
	req := httptest.NewRequest(http.MethodGet, target, http.NoBody)
	testutil.BenchHandler(b, h, req)
}

func BenchmarkEchoPlain(b *testing.B)    { benchHandler(b, "/echo") }
func BenchmarkEchoSize1024(b *testing.B) { benchHandler(b, "/echo?size=1024") }

func BenchmarkEchoWeighted(b *testing.B) {
	benchHandler(b, "/echo?status=200:50,200:50&size=512:50,1024:50&delay=0s:10")
}
