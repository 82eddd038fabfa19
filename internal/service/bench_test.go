package service

import (
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/meshperf/meshperf/internal/topology"
)

// BenchmarkHandlerLeaf is a leaf service's own work per request (count,
// answer 1 KiB, record duration and size), without the network or
// the server's parsing: what the service adds to every hop.
func BenchmarkHandlerLeaf(b *testing.B) {
	h, err := New(Config{Service: topology.Service{Name: "leaf", ResponseSize: 1024}})
	if err != nil {
		b.Fatal(err)
	}
	var ctx fasthttp.RequestCtx
	ctx.Request.SetRequestURI("/")
	b.ReportAllocs()
	for b.Loop() {
		ctx.Response.Reset()
		h.serve(&ctx)
		if ctx.Response.StatusCode() != http.StatusOK || len(ctx.Response.Body()) != 1024 {
			b.Fatalf("answered %d with %d bytes", ctx.Response.StatusCode(), len(ctx.Response.Body()))
		}
	}
}

// BenchmarkHop is one request through a two-service chain on loopback,
// real sockets and keep-alive connections: a client calls A, A calls B
// with 128 bytes (the size Istio's load test sends), B answers 1 KiB.
// cpu-us/req is the whole process's CPU (user + system) per request: the
// client, A and B together, so an upper bound on what one hop of the
// service costs; benchmarks/service-vs-isotope measures each process
// apart.
func BenchmarkHop(b *testing.B) {
	g := newGraph(b)
	g.start(topology.Service{Name: "b", ResponseSize: 1024}, Config{})
	call := callTo("b", 128)
	_, url := g.start(topology.Service{Name: "a", ResponseSize: 1024, Script: topology.Script{call}}, Config{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	defer client.CloseIdleConnections()
	get := func() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	get() // connections opened before timing
	before := cpuTime(b)
	b.ReportAllocs()
	for b.Loop() {
		get()
	}
	used := cpuTime(b) - before
	b.ReportMetric(float64(used.Microseconds())/float64(b.N), "cpu-us/req")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
