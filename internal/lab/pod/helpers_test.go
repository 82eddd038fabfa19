package pod

import (
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// helperEnv makes the test binary act as a small server process started in a
// pod, so that tests can check what a real child process can do there.
const helperEnv = "MESHPERF_POD_TEST_HELPER"

func TestMain(m *testing.M) {
	if addrs := os.Getenv(helperEnv); addrs != "" {
		os.Exit(serveHelper(strings.Split(addrs, ",")))
	}
	os.Exit(m.Run())
}

// serveHelper listens on every address, says "ready", and answers each
// connection with the address it was accepted on, for 20 seconds at most.
func serveHelper(addrs []string) int {
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			fmt.Println("listen:", err)
			return 1
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s", c.LocalAddr())
				c.Close()
			}
		}()
	}
	fmt.Println("ready")
	// Serve until the test stops this process (it is a pod's process, which
	// the test kills or the pod's removal does); the timer only bounds an
	// orphan's life.
	<-time.After(20 * time.Second)
	return 0
}

func waitForLog(t *testing.T, path, want string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), want) {
			return fmt.Errorf("%s does not say %q; it has:\n%s", path, want, b)
		}
		return nil
	})
}

// newTestNetwork creates a bridge network that is closed when the test ends;
// a Close error fails the test.
func newTestNetwork(t *testing.T) *BridgeNetwork {
	t.Helper()
	testenv.NeedNetns(t)
	n, err := NewBridgeNetwork("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return n
}

func addPods(t *testing.T, n Network, names ...string) []*Pod {
	t.Helper()
	var pods []*Pod
	for _, name := range names {
		p, err := n.AddPod(name)
		if err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	return pods
}
