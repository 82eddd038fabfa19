package driver_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/driver"
	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/kube/kubetest"
)

// BenchmarkRunOnKube1000 is cpload --kube's default scale (10 namespaces x
// 10 services x 10 pods) on kubetest with the controller manager and kwok;
// it reports the figures the lead's CI compares: all-synced time, pilot's
// peak RSS, pushes.
func BenchmarkRunOnKube1000(b *testing.B) {
	s := kubetest.Start(b).WithControllerManager(b)
	m, err := shape.Uniform(shape.UniformOptions{Namespaces: 10, ServicesPerNamespace: 10, Replicas: 10, NamespacePrefix: "cpkb-", Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv(pilotEnv, "1")
	for range b.N {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		var progress bytes.Buffer
		r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: m, Churn: driver.ChurnNone, Scoping: driver.ScopeNone,
			Kube: &driver.KubeOptions{Kubeconfig: s.Kubeconfig(b)}, PilotCommand: []string{exe, "pilot"}, Timeout: 2 * time.Minute, Progress: &progress})
		cancel()
		if err != nil {
			b.Fatalf("%v\n%s", err, progress.String())
		}
		var out bytes.Buffer
		r.Print(&out)
		b.Log(out.String())
		b.ReportMetric(r.Connect.AllSynced, "ms-synced")
		b.ReportMetric(r.Kube.ReadyMs, "ms-pods-ready")
	}
}
