package cli

// Integration tests of `meshperf load` against meshperf's own echo server (or a
// recording server where a test must see what arrived), in process on loopback
// port 0. Loads are short and bounded; assertions are on the JSON result the
// command writes, which is what users and Istio's tooling consume.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/pkg/histogram"
	"github.com/meshperf/meshperf/pkg/loadgen/grpcload"
	"github.com/meshperf/meshperf/pkg/loadgen/httpload"
	"github.com/meshperf/meshperf/pkg/loadgen/tcpload"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
)

// runLoadT runs `meshperf load args...` in process and returns what it said.
func runLoadT(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	code = runLoad(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// runJSON runs a quiet load that must succeed and returns its JSON result,
// written to standard output with -json -.
func runJSON(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := runLoadT(t, append([]string{"-quiet", "-json", "-"}, args...)...)
	if code != exitOK {
		t.Fatalf("meshperf load %v: exit %d; stderr %q", args, code, stderr)
	}
	return stdout
}

// decodeJSON decodes a whole result; json.Unmarshal also rejects anything
// after the value, so stdout must carry the JSON and nothing else.
func decodeJSON[T any](t *testing.T, data string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("result is not one JSON value: %v\n%s", err, data)
	}
	return v
}

// startEcho starts meshperf's echo server with the listeners cfg names.
func startEcho(t *testing.T, cfg echo.Config) *echo.Server {
	t.Helper()
	s := echo.New(cfg)
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// recordedRequest is what a recordingServer saw of one request.
type recordedRequest struct {
	method, proto, body string
	header              http.Header
}

// recordingServer serves next (HTTP/1.1 and h2c, 127.0.0.1:0) and keeps every
// request, for tests that check what reached the server rather than what the
// generator says it sent.
type recordingServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []recordedRequest
}

func newRecordingServer(t *testing.T, next http.Handler) *recordingServer {
	t.Helper()
	rs := &recordingServer{}
	rs.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rs.mu.Lock()
		rs.reqs = append(rs.reqs, recordedRequest{r.Method, r.Proto, string(body), r.Header.Clone()})
		rs.mu.Unlock()
		next.ServeHTTP(w, r)
	}))
	rs.Config.Protocols = new(http.Protocols)
	rs.Config.Protocols.SetHTTP1(true)
	rs.Config.Protocols.SetUnencryptedHTTP2(true)
	rs.Start()
	t.Cleanup(rs.Close)
	return rs
}

// requests returns what was recorded after closing the server, which waits for
// handlers in flight, so that a request the generator sent late is counted too.
func (rs *recordingServer) requests() []recordedRequest {
	rs.Close()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.reqs)
}

// checkHistogram checks the invariants every exported histogram must keep:
// the requested percentiles in order with values that never decrease, and
// buckets that account for every sample and end at 100%.
func checkHistogram(t *testing.T, name string, h histogram.Data, wantCount int64) {
	t.Helper()
	if h.Count != wantCount {
		t.Errorf("%s: Count %d, want %d", name, h.Count, wantCount)
	}
	var ps []float64
	for i, p := range h.Percentiles {
		ps = append(ps, p.Percentile)
		if i > 0 && p.Value < h.Percentiles[i-1].Value {
			t.Errorf("%s: p%v = %v is below p%v = %v", name, p.Percentile, p.Value,
				h.Percentiles[i-1].Percentile, h.Percentiles[i-1].Value)
		}
	}
	if want := []float64{50, 75, 90, 99, 99.9}; !slices.Equal(ps, want) {
		t.Errorf("%s: percentiles %v, want %v", name, ps, want)
	}
	var sum int64
	for _, b := range h.Data {
		sum += b.Count
	}
	if sum != h.Count {
		t.Errorf("%s: buckets hold %d samples, Count is %d", name, sum, h.Count)
	}
	if len(h.Data) == 0 || h.Data[len(h.Data)-1].Percent != 100 {
		t.Errorf("%s: last bucket does not end at 100%%: %+v", name, h.Data)
	}
}

func TestLoadHTTP1PacedResult(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	jsonPath := filepath.Join(t.TempDir(), "result.json")
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "200", "-c", "2", "-t", "500ms", "-json", jsonPath,
		"http://"+addr+"/echo?size=1024")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	if !strings.Contains(stdout, "JSON result written to "+jsonPath) {
		t.Errorf("stdout does not say where the JSON went: %q", stdout)
	}
	r := decodeJSON[httpload.Result](t, readFile(t, jsonPath))
	n := r.RetCodes[200]
	if len(r.RetCodes) != 1 || n < 90 || n > 101 {
		t.Errorf("RetCodes %v, want only 200 about 100 times (200 qps for 0.5 s)", r.RetCodes)
	}
	if r.RunType != "HTTP" || r.NumThreads != 2 || r.SocketCount != 2 {
		t.Errorf("RunType %q NumThreads %d SocketCount %d, want HTTP 2 2", r.RunType, r.NumThreads, r.SocketCount)
	}
	if math.Abs(r.ActualQPS-200) > 10 {
		t.Errorf("ActualQPS %.1f, want within 5%% of 200", r.ActualQPS)
	}
	if r.Sizes.Avg <= 1024 {
		t.Errorf("Sizes.Avg %v, want over 1024 (a 1024-byte body plus headers)", r.Sizes.Avg)
	}
	checkHistogram(t, "DurationHistogram", r.DurationHistogram, n)
	checkHistogram(t, "ServiceTimeHistogram", r.ServiceTimeHistogram, n)
	if !r.CoordinatedOmissionCorrected {
		t.Error("a paced run is not marked CoordinatedOmissionCorrected")
	}
	if r.RequestedQPS != "200" || r.RequestedDuration != "500ms" {
		t.Errorf("RequestedQPS %q RequestedDuration %q, want 200 and 500ms", r.RequestedQPS, r.RequestedDuration)
	}
	if age := time.Since(r.StartTime); age < 0 || age > time.Minute {
		t.Errorf("StartTime %v is not the time of this run", r.StartTime)
	}
	if r.ID == "" || !strings.Contains(r.Labels, addr) {
		t.Errorf("ID %q Labels %q, want an ID and labels naming %s", r.ID, r.Labels, addr)
	}
}

func TestLoadExactlyNCallsAtMaxRate(t *testing.T) {
	rs := newRecordingServer(t, echo.New(echo.Config{}).Handler())
	r := decodeJSON[httpload.Result](t, runJSON(t, "-n", "37", "-qps", "0", "-c", "3", rs.URL+"/"))
	if len(r.RetCodes) != 1 || r.RetCodes[200] != 37 || r.DurationHistogram.Count != 37 {
		t.Errorf("RetCodes %v, %d timed calls; want exactly 37 200s", r.RetCodes, r.DurationHistogram.Count)
	}
	// With -n there is no warm-up: the server must see the 37 calls and no more.
	if got := len(rs.requests()); got != 37 {
		t.Errorf("server saw %d requests, want 37", got)
	}
	if r.RequestedDuration != "exactly 37 calls" || r.RequestedQPS != "max" || r.Exactly != 37 {
		t.Errorf("RequestedDuration %q RequestedQPS %q Exactly %d", r.RequestedDuration, r.RequestedQPS, r.Exactly)
	}
	if r.CoordinatedOmissionCorrected {
		t.Error("a max-rate run has no schedule, yet is marked CoordinatedOmissionCorrected")
	}
}

func TestLoadMaxRateMinusOne(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	r := decodeJSON[httpload.Result](t, runJSON(t, "-qps", "-1", "-n", "10", "http://"+addr+"/"))
	if r.RetCodes[200] != 10 || r.RequestedQPS != "max" {
		t.Errorf("RetCodes %v RequestedQPS %q, want 10 200s at max", r.RetCodes, r.RequestedQPS)
	}
}

func TestLoadH2C(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	r := decodeJSON[httpload.Result](t, runJSON(t, "-h2", "-qps", "200", "-c", "2", "-t", "300ms",
		"http://"+addr+"/?size=100"))
	if len(r.RetCodes) != 1 || r.RetCodes[200] < 50 || !r.H2 {
		t.Errorf("RetCodes %v H2 %v, want only 200s over HTTP/2", r.RetCodes, r.H2)
	}
	if r.Sizes.Avg <= 100 {
		t.Errorf("Sizes.Avg %v, want over the 100-byte body", r.Sizes.Avg)
	}
}

func TestLoadHeadersMethodAndBodyArrive(t *testing.T) {
	for _, proto := range []string{"HTTP/1.1", "HTTP/2.0"} {
		t.Run(proto, func(t *testing.T) {
			rs := newRecordingServer(t, echo.New(echo.Config{}).Handler())
			args := []string{"-n", "3", "-qps", "0", "-c", "1", "-H", "X-Test: 1", "-X", "PUT",
				"-payload", "abc", "-content-type", "text/plain"}
			if proto == "HTTP/2.0" {
				args = append(args, "-h2")
			}
			r := decodeJSON[httpload.Result](t, runJSON(t, append(args, rs.URL+"/debug?x=y")...))
			if r.RetCodes[200] != 3 {
				t.Errorf("RetCodes %v, want 3 200s", r.RetCodes)
			}
			reqs := rs.requests()
			if len(reqs) != 3 {
				t.Fatalf("server saw %d requests, want 3", len(reqs))
			}
			for _, q := range reqs {
				if q.method != "PUT" || q.proto != proto || q.body != "abc" ||
					q.header.Get("X-Test") != "1" || q.header.Get("Content-Type") != "text/plain" {
					t.Errorf("server saw %s %s body %q headers %v; want PUT %s, body abc, X-Test: 1, Content-Type: text/plain",
						q.method, q.proto, q.body, q.header, proto)
				}
			}
		})
	}
}

func TestLoadTCPEcho(t *testing.T) {
	addr := startEcho(t, echo.Config{TCPAddr: "127.0.0.1:0"}).TCPAddr()
	r := decodeJSON[tcpload.Result](t, runJSON(t, "-payload-size", "512", "-qps", "200", "-c", "2", "-t", "300ms",
		"tcp://"+addr))
	n := r.RetCodes["OK"]
	if len(r.RetCodes) != 1 || n < 50 || r.RunType != "TCP" {
		t.Errorf("RunType %q RetCodes %v, want TCP with only OKs", r.RunType, r.RetCodes)
	}
	if r.BytesSent != n*512 || r.BytesReceived != n*512 {
		t.Errorf("sent %d received %d bytes, want %d each (%d calls of 512)", r.BytesSent, r.BytesReceived, n*512, n)
	}
}

func TestLoadGRPC(t *testing.T) {
	addr := startEcho(t, echo.Config{GRPCAddr: "127.0.0.1:0"}).GRPCAddr()
	for _, tc := range []struct {
		name     string
		args     []string
		runType  string
		ping     bool
		channels int
	}{
		{"health", nil, "GRPC Health", false, 1},
		{"ping", []string{"-ping", "-payload", "hi"}, "GRPC Ping", true, 1},
		// Regression: random -payload-size bytes are not UTF-8, and a ping
		// with them failed to marshal on every call (issue 23).
		{"ping with payload-size", []string{"-ping", "-payload-size", "1024"}, "GRPC Ping", true, 1},
		{"ping with a binary payload file", []string{"-ping", "-payload-file", "testdata/not-utf8.bin"}, "GRPC Ping", true, 1},
		{"streams", []string{"-s", "2", "-c", "2"}, "GRPC Health", false, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-grpc", "-qps", "100", "-c", "1", "-t", "300ms"}, tc.args...)
			r := decodeJSON[grpcload.Result](t, runJSON(t, append(args, addr)...))
			if n := r.RetCodes["SERVING"]; len(r.RetCodes) != 1 || n < 20 || n != r.DurationHistogram.Count {
				t.Errorf("RetCodes %v (%d timed), want only SERVING", r.RetCodes, r.DurationHistogram.Count)
			}
			if r.RunType != tc.runType || r.Ping != tc.ping || r.NumThreads != tc.channels {
				t.Errorf("RunType %q Ping %v NumThreads %d, want %q %v %d",
					r.RunType, r.Ping, r.NumThreads, tc.runType, tc.ping, tc.channels)
			}
		})
	}
}

func TestLoadAbortOnStopsTheRun(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	// The warm-up call already gets the 503, hence -allow-initial-errors.
	r := decodeJSON[httpload.Result](t, runJSON(t, "-abort-on", "503", "-allow-initial-errors",
		"-qps", "1000", "-t", "2s", "-c", "1", "http://"+addr+"/?status=503"))
	if !r.Aborted || r.AbortOn != 503 {
		t.Errorf("Aborted %v AbortOn %d, want true 503", r.Aborted, r.AbortOn)
	}
	if n := r.RetCodes[503]; n < 1 || n >= 20 {
		t.Errorf("RetCodes %v, want at least one 503 and far fewer than the 2000 asked for", r.RetCodes)
	}
}

func TestLoadJSONToStdoutSummaryToStderr(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	code, stdout, stderr := runLoadT(t, "-quiet", "-json", "-", "-n", "5", "-qps", "0", "http://"+addr+"/")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	if r := decodeJSON[httpload.Result](t, stdout); r.RetCodes[200] != 5 {
		t.Errorf("RetCodes %v, want 5 200s", r.RetCodes)
	}
	for _, want := range []string{"meshperf load at", "Ended after", "Code 200: 5"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q: %q", want, stderr)
		}
	}
}

func TestLoadTextSummary(t *testing.T) {
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0"}).HTTPAddr()
	code, stdout, stderr := runLoadT(t, "-quiet", "-qps", "200", "-c", "2", "-t", "300ms", "http://"+addr+"/")
	if code != exitOK {
		t.Fatalf("exit %d; stderr %q", code, stderr)
	}
	for _, want := range []string{"Ended after", "qps", "Code 200: ", "Sockets used: 2 (for 2 connections)", "p99 "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if stderr != "" {
		t.Errorf("a quiet successful run wrote to stderr: %q", stderr)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// writeSelfSignedCert writes a self-signed ECDSA certificate for 127.0.0.1 and
// localhost, and its key, as PEM files; the certificate is its own CA, so it
// is also what -cacert takes.
func writeSelfSignedCert(t *testing.T) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "meshperf test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for file, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: der},
		keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}

func TestLoadHTTPS(t *testing.T) {
	certFile, keyFile := writeSelfSignedCert(t)
	addr := startEcho(t, echo.Config{HTTPAddr: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile}).HTTPAddr()
	url := "https://" + addr + "/"
	for _, tc := range []struct {
		name string
		args []string
		h2   bool
	}{
		{"http1 with -cacert", []string{"-cacert", certFile}, false},
		{"h2 with -k", []string{"-h2", "-k"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"-qps", "100", "-c", "2", "-t", "300ms"}, tc.args...)
			r := decodeJSON[httpload.Result](t, runJSON(t, append(args, url)...))
			if len(r.RetCodes) != 1 || r.RetCodes[200] < 20 || r.H2 != tc.h2 || r.SocketCount != 2 {
				t.Errorf("RetCodes %v H2 %v SocketCount %d, want only 200s, H2 %v, 2 sockets",
					r.RetCodes, r.H2, r.SocketCount, tc.h2)
			}
		})
	}
	t.Run("untrusted certificate", func(t *testing.T) {
		// A generous -timeout: the refusal is immediate, but a handshake on a
		// busy machine under -race must not fail for being slow instead.
		code, _, stderr := runLoadT(t, "-quiet", "-timeout", "30s", "-qps", "100", "-t", "300ms", url)
		if code != exitFailed || !strings.Contains(stderr, "certificate") {
			t.Errorf("exit %d, stderr %q; want %d and a line about the certificate", code, stderr, exitFailed)
		}
		checkFailureLines(t, stderr, "certificate")
	})
}

// A server that stalls for 0.5 s in the middle of a paced run must show up in
// the corrected latency as the stall (requests due during it waited for it),
// while the service time, counted from each actual send, stays short: the
// requests were delayed, not dropped, so the rate is still what was asked.
func TestLoadStallShowsInCorrectedLatencyNotServiceTime(t *testing.T) {
	const stallFrom, stallTo = 800 * time.Millisecond, 1300 * time.Millisecond
	var once sync.Once
	var first time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The clock starts at the first request (the warm-up), just before the
		// run's schedule starts; every request arriving in the window waits
		// for its end, as behind a stalled server or a GC pause.
		once.Do(func() { first = time.Now() })
		if since := time.Since(first); since >= stallFrom && since < stallTo {
			time.Sleep(stallTo - since)
		}
	}))
	defer srv.Close()
	r := decodeJSON[httpload.Result](t, runJSON(t, "-qps", "200", "-c", "4", "-t", "2s", "-uniform", srv.URL+"/"))
	if len(r.RetCodes) != 1 || r.RetCodes[200] < 360 {
		t.Errorf("RetCodes %v, want about 400 200s", r.RetCodes)
	}
	if p99 := percentile(r.DurationHistogram, 99); !(p99 >= 0.25) {
		t.Errorf("corrected p99 %v s, want at least 0.25 s (the stall is 0.5 s)", p99)
	}
	if p90 := percentile(r.ServiceTimeHistogram, 90); !(p90 < 0.05) {
		t.Errorf("service-time p90 %v s, want under 0.05 s (only the 4 requests in flight saw the stall)", p90)
	}
	if math.Abs(r.ActualQPS-200) > 20 {
		t.Errorf("ActualQPS %.1f, want within 10%% of 200", r.ActualQPS)
	}
}

// recordingHealth is a gRPC health server that keeps the metadata of the
// last call.
type recordingHealth struct {
	healthpb.UnimplementedHealthServer
	mu sync.Mutex
	md metadata.MD
}

func (h *recordingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	h.mu.Lock()
	h.md = md
	h.mu.Unlock()
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// -H on a gRPC load: Host is the :authority (a sidecar routes by it, as
// Fortio sends it), User-Agent the user agent, anything else metadata.
func TestLoadGRPCHeaders(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingHealth{}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, rec)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	runJSON(t, "-grpc", "-n", "3", "-c", "1", "-H", "Host: echo.lab.svc.cluster.local:8079",
		"-H", "User-Agent: meshperf-test", "-H", "x-tenant: blue", ln.Addr().String())
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for k, want := range map[string]string{":authority": "echo.lab.svc.cluster.local:8079", "x-tenant": "blue"} {
		if got := rec.md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if ua := rec.md.Get("user-agent"); len(ua) != 1 || !strings.HasPrefix(ua[0], "meshperf-test") {
		t.Errorf("user-agent %q, want it to start with meshperf-test", ua)
	}
}
