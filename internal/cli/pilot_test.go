package cli

import (
	"context"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestPilotBadInputIsOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"--nosuchflag"},
		{"--secureGRPCAddr", "256.0.0.1:1"},
		{"--log_output_level", "loud"},
		{"--meshConfig", "/no/such/mesh.yaml"},
	} {
		var stdout, stderr syncBuffer
		dataDir := t.TempDir()
		code := runPilot(context.Background(), append(args, "--dataDir", dataDir, "--grpcAddr", "127.0.0.1:0",
			"--httpAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0"), &stdout, &stderr)
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
}

func TestPilotServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- runPilot(ctx, []string{"--dataDir", t.TempDir(), "--grpcAddr", "127.0.0.1:0",
			"--httpAddr", "127.0.0.1:0", "--monitoringAddr", "127.0.0.1:0", "--secureGRPCAddr", "127.0.0.1:0"}, &stdout, &stderr)
	}()
	banner := regexp.MustCompile(`API on (http://[0-9.:]+), metrics on (http://[0-9.:]+/metrics)`)
	var m []string
	for deadline := time.Now().Add(10 * time.Second); m == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		m = banner.FindStringSubmatch(stdout.String())
	}
	if m == nil {
		t.Fatalf("no banner; stdout %q stderr %q", stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "TLS xDS on 127.0.0.1:") {
		t.Errorf("no TLS xDS listener announced: %q", stdout.String())
	}
	for _, url := range []string{m[1] + "/ready", m[2]} {
		resp, err := http.Get(url)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("GET %s: %v %v", url, err, resp)
		} else {
			resp.Body.Close()
		}
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("exit %d after cancel; stderr %q", code, stderr.String())
	}
}
