package cli

import (
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

// TestMain stops the PostgreSQL cluster the store tests share (pgtest) and
// the Kubernetes API server the pilot's tests share (kubetest).
func TestMain(m *testing.M) { os.Exit(kubetest.Main(withPostgres{m})) }

// withPostgres runs the tests under pgtest.Main.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int { return pgtest.Main(w.m) }
