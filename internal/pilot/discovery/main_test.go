package discovery_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// stream, push or timer goroutine left running is a leak in production too.
// The Kubernetes tests share one API server, which kubetest.Main stops.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(withAPIServer{m},
		// klog's flush daemon runs for the life of any process that logs
		// through client-go, by design.
		goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}

// withAPIServer runs the tests under kubetest.Main.
type withAPIServer struct{ m *testing.M }

func (w withAPIServer) Run() int { return kubetest.Main(w.m) }
