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
// with its default endpoint churn (100 pod changes at 10/s), it reports
// the run's figures: pods ready, all synced, pushes, convergence P99.
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
		r, err := driver.Run(ctx, driver.Config{Shape: "uniform", Mesh: m, Scoping: driver.ScopeNone,
			Churn: driver.ChurnEndpoints, Namespace: "cpkb-0", Service: "svc-0", Rate: 10, Duration: 10 * time.Second,
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
		b.ReportMetric(r.ControlPlane.Pushes, "pushes")
		b.ReportMetric(r.ControlPlane.Convergence.P99, "ms-convergence-p99")
	}
}
