// Package inpod is the lab's side of ZDS, the protocol by which istio-cni's
// node agent hands a node proxy (ztunnel, or meshperf-proxy in its role) the
// network namespaces of the pods it serves. The node proxy connects to a
// SOCK_SEQPACKET unix socket (its INPOD_UDS) and says hello; the agent sends
// every pod it knows as an AddWorkload carrying the pod's netns file
// descriptor (SCM_RIGHTS), waiting for each Ack, then SnapshotSent; after
// that, pods are added and deleted one message at a time as they come and
// go. A node proxy that reconnects gets the whole snapshot again. Each
// message is one packet: the socket keeps their boundaries.
//
// The lab runs one Server per node, as istio-cni runs one agent per node.
package inpod

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
	"istio.io/istio/pkg/zdsapi"
)

// PodUID is the uid ZDS and workload discovery both name a pod by, as
// Kubernetes does: the node proxy matches the pod it is handed with the
// workload the control plane describes.
func PodUID(namespace, name string) string { return "Kubernetes//Pod/" + namespace + "/" + name }

// Workload is a pod the node proxy is to serve.
type Workload struct {
	UID                             string // PodUID(Namespace, Name)
	Name, Namespace, ServiceAccount string
	// NetnsPath is the pod's network namespace file (/run/netns/NAME), opened
	// for each AddWorkload so that the node proxy receives its own descriptor.
	NetnsPath string
}

// DefaultAckTimeout bounds the wait for the node proxy's answer to one
// message (ztunnel answers once it has opened the pod's listeners).
const DefaultAckTimeout = 10 * time.Second

// maxMessage is the largest message read from the node proxy; its Ack and
// hello are a few bytes (ztunnel reads ours into 1 KiB).
const maxMessage = 1024

// Server serves ZDS on one unix socket to one node proxy at a time.
type Server struct {
	ln         *net.UnixListener
	log        *slog.Logger
	ackTimeout time.Duration

	mu        sync.Mutex // held for a whole exchange: one message, one Ack
	workloads []Workload // in the order they were added
	conn      *net.UnixConn
	closed    bool
	done      chan struct{}
}

// Listen serves ZDS at path (a stale socket file there is replaced). log
// receives connections and refusals; nil discards them.
func Listen(path string, log *slog.Logger) (*Server, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("zds: stale socket %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("zds: listen on %s: %w", path, err)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{ln: ln, log: log.With("zds", path), ackTimeout: DefaultAckTimeout, done: make(chan struct{})}
	go s.accept()
	return s, nil
}

// Path is the socket's path, the node proxy's INPOD_UDS.
func (s *Server) Path() string { return s.ln.Addr().String() }

// accept takes each node proxy that connects; a new one replaces the old,
// as after a restart.
func (s *Server) accept() {
	defer close(s.done)
	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			return // closed
		}
		if err := s.start(c); err != nil {
			s.log.Warn("node proxy connection refused", "err", err)
			c.Close()
		}
	}
}

// start reads the node proxy's hello and sends it the snapshot.
func (s *Server) start(c *net.UnixConn) error {
	var hello zdsapi.ZdsHello
	if err := s.read(c, &hello); err != nil {
		return fmt.Errorf("hello: %w", err)
	}
	if hello.Version != zdsapi.Version_V1 {
		return fmt.Errorf("hello: node proxy speaks ZDS version %v, want V1", hello.Version)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("server closed")
	}
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	for _, w := range s.workloads {
		if err := s.exchange(c, addRequest(w), w.NetnsPath); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	snapshot := &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_SnapshotSent{SnapshotSent: &zdsapi.SnapshotSent{}}}
	if err := s.exchange(c, snapshot, ""); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.conn = c
	s.log.Info("node proxy connected; snapshot sent", "workloads", len(s.workloads))
	return nil
}

func addRequest(w Workload) *zdsapi.WorkloadRequest {
	return &zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Add{Add: &zdsapi.AddWorkload{
		Uid:          w.UID,
		WorkloadInfo: &zdsapi.WorkloadInfo{Name: w.Name, Namespace: w.Namespace, ServiceAccount: w.ServiceAccount},
	}}}
}

// Add makes w one of the node's pods: sent now to a connected node proxy
// (the error is its refusal, or the netns that could not be opened), and in
// every later snapshot. With no node proxy connected it waits for the next
// snapshot. Adding a uid again replaces it. A netns file that does not
// exist is refused at once, node proxy or not.
func (s *Server) Add(w Workload) error {
	if _, err := os.Stat(w.NetnsPath); err != nil {
		return fmt.Errorf("zds: add %s: %w %s: %w", w.UID, errNetns, w.NetnsPath, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("zds: server closed")
	}
	replaced := false
	for i := range s.workloads {
		if s.workloads[i].UID == w.UID {
			s.workloads[i], replaced = w, true
		}
	}
	if !replaced {
		s.workloads = append(s.workloads, w)
	}
	s.log.Info("add", "uid", w.UID, "netns", w.NetnsPath, "connected", s.conn != nil)
	return s.send(addRequest(w), w.NetnsPath)
}

// Del removes the pod uid from the node: the node proxy closes its
// listeners in the pod. Deleting an unknown uid is not an error.
func (s *Server) Del(uid string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("zds: server closed")
	}
	for i, w := range s.workloads {
		if w.UID == uid {
			s.workloads = append(s.workloads[:i], s.workloads[i+1:]...)
			break
		}
	}
	s.log.Info("delete", "uid", uid, "connected", s.conn != nil)
	return s.send(&zdsapi.WorkloadRequest{Payload: &zdsapi.WorkloadRequest_Del{Del: &zdsapi.DelWorkload{Uid: uid}}}, "")
}

// send is one exchange with the connected node proxy, if any. A node proxy
// that has gone away is dropped without error: what it missed is in the
// snapshot it gets when it reconnects. s.mu is held.
func (s *Server) send(req *zdsapi.WorkloadRequest, netnsPath string) error {
	if s.conn == nil {
		return nil
	}
	err := s.exchange(s.conn, req, netnsPath)
	var refused *RefusedError
	if err == nil || errors.As(err, &refused) || errors.Is(err, errNetns) {
		return err
	}
	s.log.Warn("node proxy gone; it gets the snapshot when it reconnects", "err", err)
	s.conn.Close()
	s.conn = nil
	return nil
}

// RefusedError is a node proxy's Ack with an error.
type RefusedError struct {
	Request string // what was refused, e.g. "add Kubernetes//Pod/lab/client"
	Reason  string // the Ack's error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("zds: node proxy refused %s: %s", e.Request, e.Reason)
}

var errNetns = errors.New("pod network namespace")

// exchange sends req (with the netns at netnsPath as SCM_RIGHTS when given)
// and waits for the Ack.
func (s *Server) exchange(c *net.UnixConn, req *zdsapi.WorkloadRequest, netnsPath string) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	var oob []byte
	if netnsPath != "" {
		fd, err := unix.Open(netnsPath, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w %s: %w", errNetns, netnsPath, err)
		}
		// The node proxy receives its own copy of the descriptor.
		defer unix.Close(fd)
		oob = unix.UnixRights(fd)
	}
	if err := c.SetWriteDeadline(time.Now().Add(s.ackTimeout)); err != nil {
		return err
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("send %s: %w", describe(req), err)
	}
	var resp zdsapi.WorkloadResponse
	if err := s.read(c, &resp); err != nil {
		return fmt.Errorf("ack of %s: %w", describe(req), err)
	}
	ack := resp.GetAck()
	if ack == nil {
		return fmt.Errorf("ack of %s: the node proxy's answer is not an Ack", describe(req))
	}
	if ack.GetError() != "" {
		return &RefusedError{Request: describe(req), Reason: ack.GetError()}
	}
	return nil
}

// read reads one message from the node proxy, within the ack timeout.
func (s *Server) read(c *net.UnixConn, m proto.Message) error {
	if err := c.SetReadDeadline(time.Now().Add(s.ackTimeout)); err != nil {
		return err
	}
	buf := make([]byte, maxMessage)
	n, _, flags, _, err := c.ReadMsgUnix(buf, nil)
	switch {
	case err != nil:
		return err
	case n == 0:
		return io.EOF
	case flags&unix.MSG_TRUNC != 0:
		return fmt.Errorf("message longer than %d bytes", maxMessage)
	}
	if err := proto.Unmarshal(buf[:n], m); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return nil
}

// describe names a request in errors.
func describe(req *zdsapi.WorkloadRequest) string {
	switch p := req.Payload.(type) {
	case *zdsapi.WorkloadRequest_Add:
		return "add " + p.Add.GetUid()
	case *zdsapi.WorkloadRequest_Del:
		return "delete " + p.Del.GetUid()
	case *zdsapi.WorkloadRequest_SnapshotSent:
		return "snapshot sent"
	}
	return "request"
}

// Close stops serving, disconnects the node proxy and removes the socket.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	s.mu.Unlock()
	err := s.ln.Close() // removes the socket file too
	<-s.done
	return err
}
