package httpload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/pkg/loadgen"
)

// response1k is what the echo server answers to ?size=1024, near enough.
var response1k = []byte("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nContent-Type: application/octet-stream\r\n" +
	"Date: Sat, 21 Nov 2026 13:00:00 GMT\r\n\r\n" + strings.Repeat("x", 1024))

// BenchmarkParseResponse1k is the event loop's cost of framing a 1 kB response
// that arrives in one read.
func BenchmarkParseResponse1k(b *testing.B) {
	p := newParser()
	b.SetBytes(int64(len(response1k)))
	for b.Loop() {
		p.Reset()
		if _, done, _, err := p.Feed(response1k); !done || err != nil {
			b.Fatal("not parsed")
		}
	}
}

// cannedServerEnv makes the test binary a canned server (see TestMain), so that
// the round-trip benchmarks talk to another process, as a load generator does:
// in-process, client and server would hand the CPU to each other without the
// thread wake-ups that real traffic costs, and the comparison would be wrong.
const cannedServerEnv = "MESHPERF_CANNED_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(cannedServerEnv) == "1" {
		serveCanned()
		return
	}
	os.Exit(m.Run())
}

// serveCanned answers every request on 127.0.0.1 with response1k, as cheaply as
// a server can, until its standard input closes.
func serveCanned() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println(ln.Addr())
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			br := bufio.NewReader(conn)
			for {
				// Requests here have no body: read up to the blank line.
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						return
					}
					if len(line) <= 2 {
						break
					}
				}
				if _, err := conn.Write(response1k); err != nil {
					return
				}
			}
		}()
	}
}

// cannedServer starts the canned server process and returns its address.
func cannedServer(b *testing.B) string {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cannedServerEnv+"=1", "GOMAXPROCS=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.HasPrefix(addr, "error") {
		b.Fatalf("canned server: %v %s", err, addr)
	}
	return strings.TrimSpace(addr)
}

// BenchmarkRoundTripEventLoop is one request and response on the event loop (the
// plain-HTTP path), over loopback to a canned server, one connection at full
// speed. It includes the server's time.
func BenchmarkRoundTripEventLoop(b *testing.B) {
	benchmarkRoundTrip(b, Options{URL: "http://" + cannedServer(b) + "/echo?size=1024"})
}

// BenchmarkRoundTripCaller is the same through the goroutine path (used for TLS).
func BenchmarkRoundTripCaller(b *testing.B) {
	o := Options{URL: "http://" + cannedServer(b) + "/echo?size=1024"}
	t, hs, err := o.validate()
	if err != nil {
		b.Fatal(err)
	}
	c := newHTTP1Conn(o, t, hs, loadgen.NewDialer(0, nil))
	defer c.close()
	ctx := context.Background()
	c.Call(ctx)
	for b.Loop() {
		if out := c.Call(ctx); !out.OK {
			b.Fatal(out.Err)
		}
	}
}

func benchmarkRoundTrip(b *testing.B, o Options) {
	l, err := New(o, loadgen.Options{Connections: 1, Exactly: int64(b.N)})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	r, err := l.Run(context.Background(), loadgen.Describe{})
	if err != nil {
		b.Fatal(err)
	}
	if r.RetCodes[200] != int64(b.N) {
		b.Fatalf("codes %v for %d requests", r.RetCodes, b.N)
	}
}
