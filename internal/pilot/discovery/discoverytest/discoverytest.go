// Package discoverytest runs meshperf's control plane in-process for tests:
// its xDS server on loopback, config applied from resources or YAML. The
// control plane's own tests and those of the load tests that drive it
// (cpload's sim and shape) share it; it is imported only by tests.
package discoverytest

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/config"
	"github.com/meshperf/meshperf/internal/pilot/discovery"
	"github.com/meshperf/meshperf/internal/pilot/kube"
	"github.com/meshperf/meshperf/internal/pilot/push"
)

// Start runs meshperf's control plane in-process with its xDS server on
// 127.0.0.1, port 0, and a 10ms debounce so that tests stay quick; tune may
// change the push options first. The resources are applied before it starts.
// It returns once the control plane serves xDS (its first snapshot is made),
// and stops when the test ends.
func Start(t testing.TB, tune func(*push.Options), resources ...*config.Resource) (*discovery.Server, string) {
	t.Helper()
	opts := Options(t)
	if tune != nil {
		tune(&opts.Push)
	}
	return StartWith(t, opts, func(s *discovery.Server) {
		if len(resources) > 0 {
			Apply(t, s, resources)
		}
	})
}

// Options are the options Start runs the control plane with: a store and a
// CA in the test's temporary directory, Istio's push defaults but a 10ms
// debounce.
func Options(t testing.TB) discovery.Options {
	dir := t.TempDir()
	opts := discovery.Options{StorePath: filepath.Join(dir, "config.db"), CADir: filepath.Join(dir, "ca"), Push: push.DefaultOptions()}
	opts.Push.DebounceAfter = 10 * time.Millisecond
	return opts
}

// StartKube runs the control plane as Start does, with its config and
// service registry from a Kubernetes cluster (src, which it closes).
// mesh may be nil (Istio's defaults).
func StartKube(t testing.TB, src *kube.Source, mesh *meshconfig.MeshConfig) (*discovery.Server, string) {
	t.Helper()
	opts := discovery.Options{Kube: src, CADir: filepath.Join(t.TempDir(), "ca"), Push: push.DefaultOptions(), Mesh: mesh}
	opts.Push.DebounceAfter = 10 * time.Millisecond
	return StartWith(t, opts, nil)
}

// StartWith runs the control plane with opts, as Start describes; before
// is called between New and Run.
func StartWith(t testing.TB, opts discovery.Options, before func(*discovery.Server)) (*discovery.Server, string) {
	t.Helper()
	s, err := discovery.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if before != nil {
		before(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	g := grpc.NewServer(s.GRPCServerOptions()...)
	s.RegisterGRPC(g)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); cancel(); <-done; _ = s.Close() })
	// Streams opened before the first snapshot are refused (the proxy would
	// retry); tests connect at once, so wait for it.
	select {
	case <-s.Serving():
	case <-time.After(30 * time.Second): // a hang guard, not a timing goal
		t.Fatal("the control plane made no first snapshot within 30s")
	}
	return s, ln.Addr().String()
}

// Apply writes resources to the control plane's store, failing the test on
// error.
func Apply(t testing.TB, s *discovery.Server, resources []*config.Resource) {
	t.Helper()
	if _, err := s.Writer().Apply(context.Background(), resources); err != nil {
		t.Fatal(err)
	}
}

// ApplyYAML decodes a YAML stream and applies it.
func ApplyYAML(t testing.TB, s *discovery.Server, yaml string) {
	t.Helper()
	rs, err := config.Decode("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	Apply(t, s, rs)
}
