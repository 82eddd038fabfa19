package cluster_test

// The integration test changes the host's network, iptables, sysctls and
// mounts, as the lab's tests do: run it holding the lab's lock,
//
//	flock /tmp/meshperf-netns.lock go test ./internal/kube/cluster/

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/meshperf/meshperf/internal/kube/cluster"
	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// needCluster skips t unless this machine can run the cluster.
func needCluster(t *testing.T) {
	t.Helper()
	testenv.NeedRoot(t, "the cluster creates addresses, routes, a bridge, iptables chains, cgroups and mounts")
	for _, c := range [][2]string{
		{"etcd", "etcd-server"}, {"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"},
		{"iptables-restore", "iptables"}, {"conntrack", "conntrack"},
	} {
		testenv.NeedCommand(t, c[0], c[1])
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			testenv.Missing(t, "containernetworking-plugins", "apt-get install containernetworking-plugins")
		}
	}
	testenv.NeedKubernetes(t)
}

// Up brings up a cluster whose pods run and resolve the cluster's names,
// a second Up finds it up, and Down leaves the host as it was: what the
// host had, or made while the cluster ran, of the kinds and names a
// cluster makes, is still there.
func TestUpRunsAPodAndDownRestoresTheHost(t *testing.T) {
	needCluster(t)
	testenv.NeedCommand(t, "ip", "iproute2")
	exe := testutil.MeshperfBinary(t)
	host := makeHostItemsBeforeUp(t)
	stateDir := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	var progress strings.Builder
	res, err := cluster.Up(ctx, cluster.Options{StateDir: stateDir, Wait: 2 * time.Minute, Executable: exe, Progress: &progress})
	if err != nil {
		t.Fatalf("up: %v\n%s", err, progress.String())
	}
	torn := false
	t.Cleanup(func() {
		if !torn {
			if _, err := cluster.Down(context.Background(), stateDir, nil); err != nil {
				t.Errorf("down after a failed test: %v", err)
			}
		}
	})
	t.Logf("up:\n%s", progress.String())

	runPause(t, res.Kubeconfig)
	if err := cluster.ResolveAPIService(ctx); err != nil {
		t.Errorf("CoreDNS: %v", err)
	}
	host.makeHostRuntimeItems(t)

	again, err := cluster.Up(ctx, cluster.Options{StateDir: stateDir, Wait: time.Minute, Executable: exe})
	if err != nil || !again.AlreadyUp || again.Kubeconfig != res.Kubeconfig {
		t.Errorf("second up: %+v, %v; want it to find the cluster up", again, err)
	}
	st, err := cluster.GetStatus(ctx, stateDir)
	if err != nil || !st.Up || !st.NodeReady || len(st.Processes) != 8 {
		t.Errorf("status: %+v, %v", st, err)
	}

	progress.Reset()
	down, err := cluster.Down(ctx, stateDir, &progress)
	torn = true
	if err != nil {
		t.Fatalf("down: %v\n%s", err, progress.String())
	}
	t.Logf("down:\n%s", progress.String())
	var differences []string
	for _, d := range down.Differences {
		if !host.theirs(d) {
			differences = append(differences, d)
		}
	}
	if len(differences) > 0 {
		t.Errorf("the host is not as it was:\n%s", strings.Join(differences, "\n"))
	}
	host.checkSurvived(t)
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory is still there: %v", err)
	}
	for _, r := range st.Processes {
		// The kernel keeps 15 bytes of a program's name.
		comm, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.PID), "comm"))
		if name := strings.TrimSpace(string(comm)); err == nil && name != "" && strings.HasPrefix(r.Name, name) {
			t.Errorf("%s (pid %d) still runs", r.Name, r.PID)
		}
	}
	if _, err := cluster.Down(ctx, stateDir, nil); !cluster.IsNoCluster(err) {
		t.Errorf("second down: %v, want no cluster", err)
	}
	if st, _ := cluster.GetStatus(ctx, stateDir); st.Up {
		t.Errorf("status after down: %+v", st)
	}
}

// An up that fails half-way (etcd cannot listen) tears down what it
// started: no state directory, and the host as it was.
func TestFailedUpLeavesTheHostAsItWas(t *testing.T) {
	needCluster(t)
	exe := testutil.MeshperfBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:2379")
	if err != nil {
		t.Skipf("127.0.0.1:2379 is taken already, so this test cannot take it: %v", err)
	}
	defer ln.Close()
	before, err := cluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(t.TempDir(), "cluster")
	_, err = cluster.Up(context.Background(), cluster.Options{StateDir: stateDir, Wait: time.Minute, Executable: exe})
	if err == nil || !strings.Contains(err.Error(), "etcd") || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("up: %v, want etcd's failure to listen", err)
	}
	_, logs, ok := strings.Cut(err.Error(), "(the components' logs: ")
	if !ok {
		t.Errorf("up's error does not say where the logs were kept: %v", err)
	} else {
		logs = strings.TrimSuffix(logs, ")")
		if _, err := os.Stat(filepath.Join(logs, "etcd.log")); err != nil {
			t.Errorf("etcd's log was not kept: %v", err)
		}
		os.RemoveAll(logs)
	}
	if _, err := os.Stat(stateDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the state directory is still there: %v", err)
	}
	after, err := cluster.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d := cluster.Diff(before, after); len(d) > 0 {
		t.Errorf("the host is not as it was:\n%s", strings.Join(d, "\n"))
	}
}

// runPause runs a pod of the pause image and waits until it is Running
// with an address in the pods' range.
func runPause(t *testing.T, kubeconfig string) {
	t.Helper()
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pause", Namespace: metav1.NamespaceDefault},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "pause", Image: image.Ref(image.DefaultRepo, image.Pause, ""), ImagePullPolicy: corev1.PullNever,
		}}},
	}
	// The controller manager creates the namespace's default service
	// account shortly after it starts; admission refuses pods until then.
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := c.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
	podCIDR := netip.MustParsePrefix(cluster.PodCIDR)
	testutil.Eventually(t, 60*time.Second, func() error {
		p, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodRunning {
			return errors.New("pod is " + string(p.Status.Phase) + ": " + p.Status.Message)
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !podCIDR.Contains(ip) {
			t.Fatalf("pod IP %q is not in %s", p.Status.PodIP, cluster.PodCIDR)
		}
		return nil
	})
}

// After a crash (every component killed, a pod's container and shim left
// running) down still tears everything down from the state file.
func TestDownAfterACrash(t *testing.T) {
	needCluster(t)
	exe := testutil.MeshperfBinary(t)
	stateDir := filepath.Join(t.TempDir(), "cluster")
	ctx := context.Background()
	res, err := cluster.Up(ctx, cluster.Options{StateDir: stateDir, Wait: 2 * time.Minute, Executable: exe})
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	runPause(t, res.Kubeconfig)
	st, err := cluster.GetStatus(ctx, stateDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range st.Processes {
		if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil {
			t.Errorf("kill %s: %v", p.Name, err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		st, err := cluster.GetStatus(ctx, stateDir)
		if err != nil {
			return err
		}
		for _, p := range st.Processes {
			if p.Alive {
				return errors.New(p.Name + " still runs")
			}
		}
		if st.Up {
			return errors.New("status says up")
		}
		return nil
	})
	down, err := cluster.Down(ctx, stateDir, nil)
	if err != nil {
		t.Fatalf("down: %v", err)
	}
	if len(down.Differences) > 0 {
		t.Errorf("the host is not as it was:\n%s", strings.Join(down.Differences, "\n"))
	}
}
