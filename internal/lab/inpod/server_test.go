package inpod

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"istio.io/istio/pkg/zdsapi"

	"github.com/meshperf/meshperf/internal/lab/inpod/zdstest"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/testenv"
)

// nodeProxy is the test's node proxy, with the server's Workload type.
type nodeProxy struct{ *zdstest.NodeProxy }

const ackWait = 5 * time.Second

func connect(t *testing.T, s *Server, version zdsapi.Version) nodeProxy {
	t.Helper()
	return nodeProxy{zdstest.Connect(t, s.Path(), version)}
}

func (np nodeProxy) expectAdd(w Workload, reason string) {
	np.ExpectAdd(&zdsapi.AddWorkload{Uid: w.UID, WorkloadInfo: &zdsapi.WorkloadInfo{Name: w.Name, Namespace: w.Namespace, ServiceAccount: w.ServiceAccount}},
		w.NetnsPath, reason, ackWait)
}

func (np nodeProxy) expect(what string, ok func(*zdsapi.WorkloadRequest) bool) {
	np.Expect(what, ok, ackWait)
}

func (np nodeProxy) expectSnapshotSent() { np.ExpectSnapshotSent(ackWait) }

func listen(t *testing.T) *Server {
	t.Helper()
	s, err := Listen(filepath.Join(t.TempDir(), "zds.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// async runs fn (an Add or Del, which wait for the Ack the test is to send)
// and returns its error on a channel.
func async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

func wait(t *testing.T, what string, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not return within 5s", what)
		return nil
	}
}

func testWorkload(name, netns string) Workload {
	return Workload{UID: PodUID("lab", name), Name: name, Namespace: "lab", ServiceAccount: name, NetnsPath: netns}
}

// The whole protocol over a real socket: the snapshot of what was added
// before the node proxy came, Adds and Dels as they happen, a refusal
// reported as an error, and the snapshot again after a reconnect. The
// namespace handed over is this process's own (/proc/self/ns/net), which
// needs no root; TestAddHandsOverPodNetns uses a pod's.
func TestServerSpeaksZDS(t *testing.T) {
	s := listen(t)
	self := "/proc/self/ns/net"
	client, server, extra := testWorkload("client", self), testWorkload("server", self), testWorkload("extra", self)
	if err := s.Add(client); err != nil { // no node proxy yet: kept for its snapshot
		t.Fatal(err)
	}
	np := connect(t, s, zdsapi.Version_V1)
	np.expectAdd(client, "")
	np.expectSnapshotSent()

	added := async(func() error { return s.Add(server) })
	np.expectAdd(server, "")
	if err := wait(t, "Add(server)", added); err != nil {
		t.Fatalf("Add(server): %v", err)
	}
	deleted := async(func() error { return s.Del(client.UID) })
	np.expect("delete "+client.UID, func(r *zdsapi.WorkloadRequest) bool { return r.GetDel().GetUid() == client.UID })
	if err := wait(t, "Del(client)", deleted); err != nil {
		t.Fatalf("Del(client): %v", err)
	}
	refused := async(func() error { return s.Add(extra) })
	np.expectAdd(extra, "failed to start proxy")
	err := wait(t, "Add(extra)", refused)
	var re *RefusedError
	if !errors.As(err, &re) || re.Reason != "failed to start proxy" || !strings.Contains(err.Error(), "add "+extra.UID) {
		t.Errorf("a refused Add returned %v, want the node proxy's reason", err)
	}

	// A node proxy that restarts gets every current pod again: server and
	// the refused extra (a node proxy retries those), not the deleted client.
	np.C.Close()
	np2 := connect(t, s, zdsapi.Version_V1)
	np2.expectAdd(server, "")
	np2.expectAdd(extra, "")
	np2.expectSnapshotSent()
}

// A node proxy that speaks another version is disconnected without a
// snapshot; one that goes away is dropped without failing the lab's Add.
func TestServerRefusesAndForgetsNodeProxies(t *testing.T) {
	s := listen(t)
	w := testWorkload("client", "/proc/self/ns/net")
	if err := s.Add(w); err != nil {
		t.Fatal(err)
	}
	np := connect(t, s, zdsapi.Version_NOT_USED)
	np.C.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, _, _, _, err := np.C.ReadMsgUnix(make([]byte, 1024), nil); n != 0 || err != nil && !errors.Is(err, io.EOF) {
		t.Errorf("after a hello of the wrong version: read %d bytes (%v), want the connection closed", n, err)
	}

	np = connect(t, s, zdsapi.Version_V1)
	np.expectAdd(w, "")
	np.expectSnapshotSent()
	np.C.Close()
	if err := s.Add(testWorkload("server", "/proc/self/ns/net")); err != nil {
		t.Errorf("Add with the node proxy gone: %v, want it kept for the next snapshot", err)
	}
	if err := s.Add(testWorkload("broken", "/nonexistent/netns")); err == nil || !strings.Contains(err.Error(), "/nonexistent/netns") {
		t.Errorf("Add with a missing netns file: %v", err)
	}
}

// The descriptor a node proxy receives is the pod's own network namespace.
func TestAddHandsOverPodNetns(t *testing.T) {
	testenv.NeedNetns(t)
	n, err := pod.NewBridgeNetwork("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	p, err := n.AddPod("client")
	if err != nil {
		t.Fatal(err)
	}
	s := listen(t)
	w := testWorkload("client", p.NetnsPath())
	np := connect(t, s, zdsapi.Version_V1)
	np.expectSnapshotSent()
	added := async(func() error { return s.Add(w) })
	np.expectAdd(w, "")
	if err := wait(t, "Add", added); err != nil {
		t.Fatal(err)
	}
	if zdstest.Inode(t, w.NetnsPath) == zdstest.Inode(t, "/proc/self/ns/net") {
		t.Errorf("the pod's namespace is this process's: the test proves nothing")
	}
}
