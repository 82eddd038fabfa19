package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshperf/meshperf/internal/pilot/xds"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testutil"
)

func TestPilotBadInputIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"--nosuchflag"},
		{"--secureGRPCAddr", "256.0.0.1:1"},
		{"--log_output_level", "loud"},
		{"--log_output_level", "default:info,ads:loud"},
		{"--meshConfig", "/no/such/mesh.yaml"},
		{"stray-argument"},
	} {
		var stdout, stderr syncBuffer
		dataDir := t.TempDir()
		code := runPilot(context.Background(), append([]string{"--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0",
			"--httpAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0"}, args...), &stdout, &stderr)
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if (code != exitBadInput && code != exitFailed) || len(lines) != 1 || !strings.HasPrefix(lines[0], "meshperf pilot: ") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr.String())
		}
		if entries, _ := os.ReadDir(dataDir); len(entries) != 0 {
			t.Errorf("%v: bad input left %d entries in the data directory", args, len(entries))
		}
	}
	t.Setenv("PILOT_DEBOUNCE_AFTER", "soon")
	var stderr syncBuffer
	if code := runPilot(context.Background(), nil, &syncBuffer{}, &stderr); code != exitBadInput || !strings.Contains(stderr.String(), "PILOT_DEBOUNCE_AFTER") {
		t.Errorf("a bad PILOT_DEBOUNCE_AFTER: exit %d, %q", code, stderr.String())
	}
	t.Setenv("PILOT_DEBOUNCE_AFTER", "")
	for _, ratio := range []string{"half", "0", "1.5"} {
		t.Setenv("AUTOMEMLIMIT", ratio)
		var stderr syncBuffer
		code := runPilot(context.Background(), []string{"--dataDir", t.TempDir()}, &syncBuffer{}, &stderr)
		if lines := strings.Split(strings.TrimSpace(stderr.String()), "\n"); code != exitBadInput || len(lines) != 1 || !strings.Contains(lines[0], "AUTOMEMLIMIT") {
			t.Errorf("AUTOMEMLIMIT=%s: exit %d, %q; want exit 2 and one line naming it", ratio, code, stderr.String())
		}
	}
}

// `meshperf pilot --httpAddr=` once panicked on a nil listener.
func TestPilotEmptyRequiredAddressIsRefused(t *testing.T) {
	for flag, example := range map[string]string{"httpAddr": "127.0.0.1:15016", "grpcAddr": "127.0.0.1:15010", "monitoringAddr": "127.0.0.1:15014"} {
		var stdout, stderr syncBuffer
		code := runPilot(context.Background(), []string{"--dataDir", t.TempDir(), "--" + flag + "="}, &stdout, &stderr)
		want := "meshperf pilot: --" + flag + ": an address is required, e.g. " + example + "\n"
		if code != exitBadInput || stderr.String() != want || stdout.String() != "" {
			t.Errorf("--%s=: exit %d, stderr %q, stdout %q; want exit 2 and %q", flag, code, stderr.String(), stdout.String(), want)
		}
	}
}

// Port 0 everywhere: the ready file says where each listener ended up, and
// each answers there (ADS in plain text and over TLS, the API, metrics).
func TestPilotReadyFileNamesListenersThatAnswer(t *testing.T) {
	dataDir, readyFile := t.TempDir(), filepath.Join(t.TempDir(), "pilot.ready")
	r, stop := startPilot(t, "--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--secureGRPCAddr", "127.0.0.1:0", "--ready-file", readyFile,
		"--log_output_level", "warn")
	if r.PID != os.Getpid() || len(r.Listeners) != 4 {
		t.Errorf("ready file %+v: want this process's pid and 4 listeners", r)
	}
	for _, name := range []string{"grpc", "http", "monitoring", "secureGRPC"} {
		if a := r.Listeners[name]; !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
			t.Errorf("listener %s at %q: want a bound port", name, a)
		}
	}
	getStatus(t, "http://"+r.Listeners["http"]+"/ready")
	getStatus(t, "http://"+r.Listeners["monitoring"]+"/metrics")
	requestClusters(t, r.Listeners["grpc"], insecure.NewCredentials())
	root, err := os.ReadFile(filepath.Join(dataDir, "ca", "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	requestClusters(t, r.Listeners["secureGRPC"], credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"}))
	stop()
	if _, err := os.Stat(readyFile); !os.IsNotExist(err) {
		t.Errorf("the ready file outlived the control plane: %v", err)
	}
}

// startPilot runs meshperf pilot in this process with args (which must
// name a ready file) until stop, which checks that it exited 0.
func startPilot(t *testing.T, args ...string) (r proc.Ready, stop func()) {
	t.Helper()
	r, _, stop = startPilotLogged(t, args...)
	return r, stop
}

// startPilotLogged is startPilot, also returning what pilot writes to its
// stderr (its log).
func startPilotLogged(t *testing.T, args ...string) (r proc.Ready, stderr *syncBuffer, stop func()) {
	t.Helper()
	readyFile := ""
	for i, a := range args {
		if a == "--ready-file" && i+1 < len(args) {
			readyFile = args[i+1]
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout syncBuffer
	stderr = &syncBuffer{}
	done := make(chan int)
	go func() { done <- runPilot(ctx, args, &stdout, stderr) }()
	t.Cleanup(cancel)
	return waitReadyFile(t, readyFile), stderr, func() {
		t.Helper()
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("exit %d after cancel; stderr %q", code, stderr.String())
		}
	}
}

// waitReadyFile waits for a server run in this process to write its ready
// file, and returns what it says.
func waitReadyFile(t *testing.T, path string) proc.Ready {
	t.Helper()
	var r proc.Ready
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		r, err = proc.ReadReady(path)
		return err
	})
	return r
}

func getStatus(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET %s: %s", url, resp.Status)
	}
}

// requestClusters opens an ADS stream to addr and asks for clusters, as a
// sidecar does first.
func requestClusters(t *testing.T, addr string, creds credentials.TransportCredentials) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop"})
	if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xds.ClusterType,
		Node: &corev3.Node{Id: "sidecar~10.0.0.9~x-1.shop~shop.svc.cluster.local", Metadata: meta}}); err != nil {
		t.Fatal(err)
	}
	if r, err := stream.Recv(); err != nil || r.TypeUrl != xds.ClusterType {
		t.Errorf("ADS at %s: %v, %v", addr, r, err)
	}
}

// A server that stops with an error ends pilot with exit 1 and the reason,
// instead of leaving it running without, here, its metrics.
func TestPilotListenerFailingAtServeExitsOne(t *testing.T) {
	var stdout, stderr syncBuffer
	cmd := newCommand("meshperf pilot", "[flags]", "")
	f, err := parsePilotArgs(cmd, []string{"--dataDir", t.TempDir(), "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--log_output_level", "warn"}, &stdout)
	if err != nil {
		t.Fatalf("flags refused: %v", err)
	}
	if err := f.listeners.bind(); err != nil {
		t.Fatal(err)
	}
	defer f.listeners.close()
	broken := f.listeners.get(listenerMonitoring)
	broken.Close() // its Accept now fails for good
	done := make(chan int, 1)
	go func() { done <- runBoundPilot(context.Background(), f, &stdout, &stderr) }()
	select {
	case code := <-done:
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		if code != exitFailed || len(lines) != 1 || !strings.Contains(lines[0], "metrics on "+broken.Addr().String()+" stopped") {
			t.Errorf("exit %d, stderr %q; want exit 1 and one line naming the metrics listener", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("pilot kept running with a failed listener")
	}
}

func TestPilotLogLevels(t *testing.T) {
	for _, c := range []struct {
		in      string
		levels  map[string]slog.Level // scope -> level; unnamed scopes follow "default"
		unknown []string
	}{
		{"debug", map[string]slog.Level{"default": slog.LevelDebug, "ads": slog.LevelDebug}, nil},
		{"default:info,ads:debug", map[string]slog.Level{"default": slog.LevelInfo, "ads": slog.LevelDebug, "push": slog.LevelInfo}, nil},
		{"warn,push:error", map[string]slog.Level{"default": slog.LevelWarn, "push": slog.LevelError, "ca": slog.LevelWarn}, nil},
		{"all:error,api:debug", map[string]slog.Level{"default": slog.LevelError, "store": slog.LevelError, "api": slog.LevelDebug}, nil},
		{"ads:none", map[string]slog.Level{"default": slog.LevelInfo, "ads": levelOff}, nil},
		{"default:info,klog:debug,validation:warn", map[string]slog.Level{"default": slog.LevelInfo}, []string{"klog", "validation"}},
		{"WARN", map[string]slog.Level{"default": slog.LevelWarn}, nil},
	} {
		l, err := parseLogLevels(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		for scope, want := range c.levels {
			if got := l.level(scope); got != want {
				t.Errorf("%q: scope %s at %v, want %v", c.in, scope, got, want)
			}
		}
		if strings.Join(l.unknown, ",") != strings.Join(c.unknown, ",") {
			t.Errorf("%q: unknown scopes %v, want %v", c.in, l.unknown, c.unknown)
		}
	}
	for _, bad := range []string{"loud", "ads:loud", "default:"} {
		if _, err := parseLogLevels(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Each scope's lines carry its name and obey its level; an unknown scope
// starts pilot with one warning, as istiod accepts scopes it lacks.
func TestPilotScopedLoggers(t *testing.T) {
	l, err := parseLogLevels("warn,ads:debug")
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	logger := l.loggers(&out)
	logger("ads").Debug("xds connected", "conn", 1)
	logger("push").Info("push debounce stable")
	logger(defaultScope).Info("not shown")
	logger(defaultScope).Warn("config watch fell behind")
	got := out.String()
	for _, want := range []string{`level=DEBUG msg="xds connected" scope=ads conn=1`, `level=WARN msg="config watch fell behind"` + "\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "push debounce") || strings.Contains(got, "not shown") {
		t.Errorf("lines below their scope's level were logged:\n%s", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	readyFile := filepath.Join(t.TempDir(), "ready")
	done := make(chan int)
	go func() {
		done <- runPilot(ctx, []string{"--dataDir", t.TempDir(), "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
			"--monitoringAddr", "127.0.0.1:0", "--ready-file", readyFile, "--log_output_level", "default:info,klog:debug"}, &stdout, &stderr)
	}()
	waitReadyFile(t, readyFile)
	cancel()
	if code := <-done; code != exitOK || strings.Count(stderr.String(), "scope=klog") != 1 {
		t.Errorf("exit %d, stderr %q; want 0 and one warning about scope klog", code, stderr.String())
	}
}

// Pilot ends on its signal (here its context, as untilSignalled cancels it
// on SIGTERM) while hundreds of proxies keep their ADS streams open: it
// closes them rather than waiting for the proxies to leave, and waits for
// the closing no longer than its grace.
func TestPilotExitsWhileStreamsStayOpen(t *testing.T) {
	dir := t.TempDir()
	readyFile := filepath.Join(dir, "ready.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- runPilot(ctx, []string{"--dataDir", dir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
			"--monitoringAddr", "127.0.0.1:0", "--maxRequestsPerSecond", "0", "--log_output_level", "warn", "--ready-file", readyFile}, &stdout, &stderr)
	}()
	addr := waitReadyFile(t, readyFile).Listeners[listenerGRPC]

	const proxies = 300
	streamCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	ended := make(chan error, proxies)
	for i := range proxies {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		stream, err := discoveryv3.NewAggregatedDiscoveryServiceClient(cc).StreamAggregatedResources(streamCtx)
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := structpb.NewStruct(map[string]any{"NAMESPACE": "shop"})
		if err := stream.Send(&discoveryv3.DiscoveryRequest{TypeUrl: xds.ClusterType,
			Node: &corev3.Node{Id: "sidecar~10.0.0.9~p-" + strconv.Itoa(i) + ".shop~shop.svc.cluster.local", Metadata: meta}}); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("proxy %d: first response: %v", i, err)
		}
		// The proxy keeps reading, and never closes its stream itself.
		go func() {
			for {
				if _, err := stream.Recv(); err != nil {
					ended <- err
					return
				}
			}
		}()
	}

	cancel()
	// The bound is far above the grace: it tells an exit from none (a
	// pilot waiting for its proxies to leave would never exit here).
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d; stderr %q", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("pilot did not exit with %d streams open", proxies)
	}
	for range proxies {
		select {
		case <-ended:
		case <-time.After(30 * time.Second):
			t.Fatal("a proxy's stream was still open after pilot exited")
		}
	}
}

// Bytes that are not gRPC on the plaintext xDS port (an HTTP/1 request,
// a TLS client) and a failed TLS handshake on the TLS port are logged with
// their peer; gRPC refuses them without a word of its own. Both ports
// still serve proxies after them.
func TestPilotLogsConnectionsThatAreNotGRPC(t *testing.T) {
	dir := t.TempDir()
	r, stderr, stop := startPilotLogged(t, "--dataDir", dir, "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--secureGRPCAddr", "127.0.0.1:0", "--log_output_level", "warn",
		"--ready-file", filepath.Join(dir, "ready.json"))
	plain, secure := r.Listeners[listenerGRPC], r.Listeners[listenerSecureGRPC]

	testutil.WriteAndWaitForClose(t, plain, []byte("GET /debug/syncz HTTP/1.1\r\nHost: pilot\r\n\r\n"))
	testutil.WriteAndWaitForClose(t, secure, []byte("GET / HTTP/1.1\r\nHost: pilot\r\n\r\n"))
	requestClusters(t, plain, insecure.NewCredentials())
	root, err := os.ReadFile(filepath.Join(dir, "ca", "root-cert.pem"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(root)
	requestClusters(t, secure, credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "istiod.istio-system.svc"}))

	// gRPC's TLS credentials close a connection before its handshake's
	// error is logged.
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(stderr.String(), "TLS handshake failed") {
			return errors.New("the failed TLS handshake is not logged")
		}
		return nil
	})
	stop()
	logged := stderr.String()
	for _, want := range []string{
		"not HTTP/2", "address=" + plain, `firstBytes="GET /debug/syncz HTTP/1.`,
		"TLS handshake failed", "address=" + secure, "peer=127.0.0.1:",
	} {
		if !strings.Contains(logged, want) {
			t.Errorf("the log lacks %q:\n%s", want, logged)
		}
	}
}
