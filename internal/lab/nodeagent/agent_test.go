package nodeagent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"istio.io/istio/pkg/zdsapi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/meshperf/meshperf/internal/kube/kubetest"
	"github.com/meshperf/meshperf/internal/lab/inpod"
	"github.com/meshperf/meshperf/internal/lab/inpod/zdstest"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

func TestEnrolled(t *testing.T) {
	ambientNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{DataplaneModeLabel: DataplaneAmbient}}}
	plainNS := &corev1.Namespace{}
	running := func(edit func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
			Status: corev1.PodStatus{PodIP: "198.18.1.5", Phase: corev1.PodRunning}}
		if edit != nil {
			edit(p)
		}
		return p
	}
	now := metav1.Now()
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		ns   *corev1.Namespace
		want bool
	}{
		{"namespace ambient", running(nil), ambientNS, true},
		{"namespace plain", running(nil), plainNS, false},
		{"namespace unknown", running(nil), nil, false},
		{"pod label ambient", running(func(p *corev1.Pod) { p.Labels = map[string]string{DataplaneModeLabel: DataplaneAmbient} }), plainNS, true},
		{"pod opts out", running(func(p *corev1.Pod) { p.Labels = map[string]string{DataplaneModeLabel: DataplaneNone} }), ambientNS, false},
		{"sidecar", running(func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "istio-proxy"})
		}), ambientNS, false},
		{"native sidecar", running(func(p *corev1.Pod) {
			p.Spec.InitContainers = []corev1.Container{{Name: "istio-proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}}
		}), ambientNS, false},
		{"host network", running(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), ambientNS, false},
		{"no address yet", running(func(p *corev1.Pod) { p.Status.PodIP = "" }), ambientNS, false},
		{"terminating (served until it is gone)", running(func(p *corev1.Pod) { p.DeletionTimestamp = &now }), ambientNS, true},
		{"completed", running(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), ambientNS, false},
	} {
		if got := Enrolled(c.pod, c.ns); got != c.want {
			t.Errorf("%s: Enrolled = %v, want %v", c.name, got, c.want)
		}
	}
}

// The agent on a real API server: a lab network namespace with a process in
// it stands for a pod's sandbox, and a Pod object on the agent's node with
// its address, in a namespace labelled ambient, for the pod. The agent
// finds the namespace through /proc, installs the in-pod rules in it and
// hands it to the node proxy over ZDS; deleting the Pod takes it back and
// removes the rules.
func TestAgentEnrolsAndReleasesAPod(t *testing.T) {
	testenv.NeedNetns(t)
	testenv.NeedCommand(t, "iptables-save", "iptables")
	testenv.NeedCommand(t, "ip", "iproute2")
	sleep := testenv.NeedCommand(t, "sleep", "coreutils")
	api := kubetest.Start(t)
	client := api.Client(t)

	network, err := pod.NewBridgeNetwork("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { network.Close() })
	sandbox, err := network.AddPod("app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.Start(proc.Spec{Name: "sleep", Path: sleep, Args: []string{"60"}}); err != nil {
		t.Fatal(err)
	}

	const node = "node-a"
	ns := api.NewNamespace(t, map[string]string{DataplaneModeLabel: DataplaneAmbient})
	ctx := context.Background()
	p, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default",
			Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/none:0"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: sandbox.IP().String(),
		PodIPs: []corev1.PodIP{{IP: sandbox.IP().String()}}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The same address on another node's pod is not this agent's.
	if _, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
		Spec:       corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "app", Image: "meshperf.local/none:0"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	zds, err := inpod.Listen(filepath.Join(t.TempDir(), "zds.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { zds.Close() })
	np := zdstest.Connect(t, zds.Path(), zdsapi.Version_V1)
	np.ExpectSnapshotSent(5 * time.Second)

	agent, err := New(Config{Client: client, Node: node, ZDS: zds, Resync: 200 * time.Millisecond,
		Log: slog.New(slog.NewTextHandler(testWriter{t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- agent.Run(runCtx, nil) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	uid := inpod.PodUID(ns, "app")
	// The Add comes while the rules are in: they go in first.
	np.ExpectAdd(&zdsapi.AddWorkload{Uid: uid, WorkloadInfo: &zdsapi.WorkloadInfo{Name: "app", Namespace: ns, ServiceAccount: "default"}},
		sandbox.NetnsPath(), "", 30*time.Second)
	if rules, nat := inpodState(t, sandbox); rules != 1 || !strings.Contains(nat, "--to-ports 15006") || !strings.Contains(nat, "--to-ports 15001") {
		t.Fatalf("after the Add: %d fwmark rules (want 1), nat table:\n%s", rules, nat)
	}

	if err := client.CoreV1().Pods(ns).Delete(ctx, "app", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	np.Expect("delete "+uid, func(r *zdsapi.WorkloadRequest) bool { return r.GetDel().GetUid() == uid }, 30*time.Second)
	// The rules go right after the Del's Ack.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rules, nat := inpodState(t, sandbox)
		if rules == 0 && !strings.Contains(nat, "ISTIO") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the Del: %d fwmark rules, nat table:\n%s", rules, nat)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inpodState reads, in the sandbox, the policy rules sending marked
// connections to the in-pod table, and the nat table.
func inpodState(t *testing.T, sandbox *pod.Pod) (rules int, nat string) {
	t.Helper()
	var ruleOut, natOut []byte
	if err := sandbox.Do(func() error {
		var err error
		if ruleOut, err = exec.Command("ip", "-4", "rule", "show").Output(); err != nil {
			return err
		}
		natOut, err = exec.Command("iptables-save", "-t", "nat").Output()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(ruleOut), fmt.Sprintf("lookup %d", pod.InpodRouteTable)), string(natOut)
}

// testWriter sends the agent's log to the test's.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
