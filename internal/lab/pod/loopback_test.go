package pod

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
)

func TestLoopbackNetwork(t *testing.T) {
	n, err := NewLoopbackNetwork("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	if n.Kind() != KindLoopback {
		t.Errorf("Kind = %q", n.Kind())
	}
	a, err := n.AddPod("client")
	if err != nil {
		t.Fatal(err)
	}
	b, err := n.AddPod("server")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.AddPod("server"); err == nil {
		t.Error("AddPod accepted a duplicate name")
	}
	for _, bad := range []string{"", "Upper", "-x", "has space", strings.Repeat("a", 40)} {
		if _, err := n.AddPod(bad); err == nil {
			t.Errorf("AddPod(%q) accepted a bad name", bad)
		}
	}
	lo := netip.MustParsePrefix("127.0.0.0/8")
	if a.IP() == b.IP() || !lo.Contains(a.IP()) || !lo.Contains(b.IP()) || a.IP() == n.Gateway() {
		t.Fatalf("pod addresses %s, %s: want distinct loopback addresses other than %s", a.IP(), b.IP(), n.Gateway())
	}
	if got := n.Pods(); len(got) != 2 || got[0] != a || got[1] != b {
		t.Errorf("Pods() = %v", got)
	}

	// Each pod binds its own address: both can use the same port.
	var ln net.Listener
	if err := b.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", netip.AddrPortFrom(b.IP(), 0).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.WriteString(c, "hello")
			c.Close()
		}
	}()
	var got []byte
	if err := a.Do(func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err = io.ReadAll(c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello" {
		t.Errorf("read %q, want hello", got)
	}

	if err := a.Capture(CaptureOptions{}); !errors.Is(err, ErrCaptureNeedsNetns) {
		t.Errorf("Capture on a loopback pod: %v, want ErrCaptureNeedsNetns", err)
	}
	if a.Netns() != "" {
		t.Errorf("loopback pod has a namespace %q", a.Netns())
	}
}

func TestLoopbackCommandStopAndClose(t *testing.T) {
	n, err := NewLoopbackNetwork("lbtest")
	if err != nil {
		t.Fatal(err)
	}
	p, err := n.AddPod("app")
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(t.TempDir(), "app.log")
	c, err := p.Start(proc.Spec{Path: "sh", Args: []string{"-c", "echo started; exec sleep 30"}, LogPath: log, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if c.PID() <= 0 {
		t.Fatalf("PID = %d", c.PID())
	}
	waitForLog(t, log, "started")
	select {
	case <-c.Done():
		t.Fatal("process exited early")
	default:
	}
	if err := n.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Close returned with the process still running")
	}
	if err := c.Wait(); err == nil {
		t.Error("Wait after a SIGTERM returned nil, want the signal")
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := n.AddPod("late"); err == nil {
		t.Error("AddPod after Close succeeded")
	}
	if _, err := p.Start(proc.Spec{Path: "true"}); err == nil {
		t.Error("Start in a removed pod succeeded")
	}
}

func TestBadRunIDAndKind(t *testing.T) {
	for _, id := range []string{"UPPER", "toolong7", "a-b"} {
		if _, err := NewLoopbackNetwork(id); err == nil {
			t.Errorf("run id %q accepted", id)
		}
	}
	if n, err := New(Options{Kind: KindLoopback}); err != nil || n.Kind() != KindLoopback {
		t.Errorf("New(loopback) = %v, %v", n, err)
	}
	if _, err := New(Options{Kind: "vm"}); err == nil {
		t.Error("unknown kind accepted")
	}
	if _, err := Clean("x-"); err == nil {
		t.Error("Clean accepted a prefix that is not the lab's")
	}
}
