package cli

import (
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

// TestMain stops the PostgreSQL cluster the store tests share (pgtest) and
// the API server the pilot's Kubernetes tests share (kubetest).
func TestMain(m *testing.M) {
	os.Exit(kubetest.Main(kubetest.RunnerFunc(func() int { return pgtest.Main(m) })))
}
