// Package zdstest plays the node proxy's end of ZDS for tests, with a real
// SOCK_SEQPACKET connection: it says hello, reads each request with its
// descriptors, and answers with an Ack. The ZDS server's tests and the node
// agent's use it.
package zdstest

import (
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"
)

// NodeProxy is a connected node proxy.
type NodeProxy struct {
	t *testing.T
	C *net.UnixConn
}

// Connect dials the ZDS socket at path and says hello with version.
func Connect(t *testing.T, path string, version zdsapi.Version) *NodeProxy {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	np := &NodeProxy{t: t, C: c}
	np.Write(&zdsapi.ZdsHello{Version: version})
	return np
}

// Write sends one message.
func (np *NodeProxy) Write(m proto.Message) {
	np.t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		np.t.Fatal(err)
	}
	if _, _, err := np.C.WriteMsgUnix(b, nil, nil); err != nil {
		np.t.Fatal(err)
	}
}

// Ack answers the last request; reason "" accepts it.
func (np *NodeProxy) Ack(reason string) {
	np.t.Helper()
	np.Write(&zdsapi.WorkloadResponse{Payload: &zdsapi.WorkloadResponse_Ack{Ack: &zdsapi.Ack{Error: reason}}})
}

// Request reads one request, within timeout, and the descriptors that came
// with it (closed when the test ends).
func (np *NodeProxy) Request(timeout time.Duration) (*zdsapi.WorkloadRequest, []int) {
	np.t.Helper()
	np.C.SetReadDeadline(time.Now().Add(timeout))
	buf, oob := make([]byte, 1024), make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := np.C.ReadMsgUnix(buf, oob)
	if err != nil {
		np.t.Fatalf("read request: %v", err)
	}
	var fds []int
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		np.t.Fatal(err)
	}
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			np.t.Fatal(err)
		}
		fds = append(fds, got...)
	}
	for _, fd := range fds {
		np.t.Cleanup(func() { unix.Close(fd) })
	}
	var req zdsapi.WorkloadRequest
	if err := proto.Unmarshal(buf[:n], &req); err != nil {
		np.t.Fatal(err)
	}
	return &req, fds
}

// ExpectAdd reads an AddWorkload equal to want, checks that its one
// descriptor is the network namespace at netnsPath (the same inode), and
// acks it with reason.
func (np *NodeProxy) ExpectAdd(want *zdsapi.AddWorkload, netnsPath, reason string, timeout time.Duration) {
	np.t.Helper()
	req, fds := np.Request(timeout)
	if add := req.GetAdd(); !proto.Equal(add, want) {
		np.t.Fatalf("got %v, want add %v", req, want)
	}
	if len(fds) != 1 {
		np.t.Fatalf("add %s came with %d descriptors, want 1", want.Uid, len(fds))
	}
	got, wantID := Inode(np.t, "/proc/self/fd/"+strconv.Itoa(fds[0])), Inode(np.t, netnsPath)
	if got != wantID {
		np.t.Errorf("add %s: descriptor is inode %v, the netns %s is %v", want.Uid, got, netnsPath, wantID)
	}
	np.Ack(reason)
}

// Expect reads a request ok accepts, with no descriptor, and acks it.
func (np *NodeProxy) Expect(what string, ok func(*zdsapi.WorkloadRequest) bool, timeout time.Duration) {
	np.t.Helper()
	req, fds := np.Request(timeout)
	if !ok(req) || len(fds) != 0 {
		np.t.Fatalf("got %v with %d descriptors, want %s and none", req, len(fds), what)
	}
	np.Ack("")
}

// ExpectSnapshotSent reads the end of the snapshot and acks it.
func (np *NodeProxy) ExpectSnapshotSent(timeout time.Duration) {
	np.t.Helper()
	np.Expect("snapshot sent", func(r *zdsapi.WorkloadRequest) bool { return r.GetSnapshotSent() != nil }, timeout)
}

// FileID is a file's device and inode.
type FileID struct{ Dev, Ino uint64 }

// Inode is the identity of the file at path.
func Inode(t *testing.T, path string) FileID {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return FileID{uint64(st.Dev), st.Ino}
}
