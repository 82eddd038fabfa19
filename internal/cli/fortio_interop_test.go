package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/echo"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/pkg/loadgen/grpcload"
)

// gRPC ping against Fortio's own binary, both ways, with a -payload-size
// payload: meshperf's client against `fortio server`, and `fortio load`
// against meshperf's server. Before issue 23 meshperf's client sent the
// random bytes as they were, which no gRPC stack will marshal into the
// ping's string field.
func TestFortioGRPCPingInterop(t *testing.T) {
	fortio := testenv.NeedFortio(t)
	const calls = 40

	t.Run("meshperf load to fortio server", func(t *testing.T) {
		addr := startFortioServer(t, fortio)
		r := decodeJSON[grpcload.Result](t, runJSON(t, "-grpc", "-ping", "-payload-size", "1024",
			"-qps", "200", "-c", "2", "-n", "40", addr))
		if n := r.RetCodes["SERVING"]; n != calls || len(r.RetCodes) != 1 {
			t.Errorf("RetCodes %v, want %d SERVING and nothing else", r.RetCodes, calls)
		}
	})

	t.Run("fortio load to meshperf server", func(t *testing.T) {
		addr := startEcho(t, echo.Config{GRPCAddr: "127.0.0.1:0"}).GRPCAddr()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, fortio, "load", "-grpc", "-ping", "-payload-size", "1024",
			"-qps", "200", "-c", "2", "-n", "40", "-json", "-", addr)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("fortio load: %v\n%s", err, stderr.String())
		}
		var r struct{ RetCodes map[string]int64 }
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatalf("fortio's JSON: %v\n%s", err, stdout.String())
		}
		if n := r.RetCodes["SERVING"]; n != calls || len(r.RetCodes) != 1 {
			t.Errorf("RetCodes %v, want %d SERVING and nothing else", r.RetCodes, calls)
		}
	})
}

// startFortioServer runs `fortio server` with only its gRPC ping server on a
// loopback port of the kernel's choosing, and returns that address, read
// from Fortio's start-up log line.
func startFortioServer(t *testing.T, fortio string) string {
	t.Helper()
	cmd := exec.Command(fortio, "server", "-grpc-port", "127.0.0.1:0", "-http-port", "disabled",
		"-redirect-port", "disabled", "-tcp-port", "disabled", "-udp-port", "disabled")
	logs, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		const marker = "grpc 'ping' server listening on tcp "
		sc := bufio.NewScanner(logs)
		for sc.Scan() {
			var line struct{ Msg string }
			if json.Unmarshal(sc.Bytes(), &line) == nil {
				if _, addr, ok := strings.Cut(line.Msg, marker); ok {
					found <- addr
					break
				}
			}
		}
		for sc.Scan() { // keep the pipe drained
		}
	}()
	select {
	case addr := <-found:
		return addr
	case <-time.After(10 * time.Second):
		t.Fatal("fortio server did not say where its gRPC server listens within 10s")
		return ""
	}
}
