package pod

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
)

// dialRead connects to addr from inside p and returns what the server sends.
func dialRead(p *Pod, addr string) (string, error) {
	return dialReadWith(p, &net.Dialer{Timeout: 5 * time.Second}, addr)
}

// dialReadWith is dialRead through d (a socket option, a timeout).
func dialReadWith(p *Pod, d *net.Dialer, addr string) (string, error) {
	var got []byte
	err := p.Do(func() error {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		got, err = io.ReadAll(c)
		return err
	})
	return string(got), err
}

// listenIn listens on addr inside p and answers every connection with "hi".
func listenIn(t *testing.T, p *Pod, addr string) net.Listener {
	return serveIn(t, p, addr, func(c net.Conn) { io.WriteString(c, "hi") })
}

// serveIn listens on addr inside p and runs handle on every connection,
// closing it after.
func serveIn(t *testing.T, p *Pod, addr string, handle func(net.Conn)) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := p.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listen on %s in %s: %v", addr, p.Name(), err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handle(c)
			c.Close()
		}
	}()
	return ln
}

func TestPodsExchangeTCP(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "a", "b")
	a, b := pods[0], pods[1]
	if !n.Subnet().Contains(a.IP()) || !n.Subnet().Contains(b.IP()) || a.IP() == b.IP() {
		t.Fatalf("pod addresses %s, %s not distinct in %s", a.IP(), b.IP(), n.Subnet())
	}
	listenIn(t, a, netip.AddrPortFrom(a.IP(), 8080).String())
	if got, err := dialRead(b, netip.AddrPortFrom(a.IP(), 8080).String()); err != nil || got != "hi" {
		t.Fatalf("b -> a:8080 = %q, %v; want hi", got, err)
	}
	// The host reaches pods over the bridge, as the control plane will.
	c, err := net.DialTimeout("tcp", netip.AddrPortFrom(a.IP(), 8080).String(), 5*time.Second)
	if err != nil {
		t.Fatalf("host -> a:8080: %v", err)
	}
	c.Close()
	// Loopback is per pod: a's 127.0.0.1 listener is invisible from b.
	ln := listenIn(t, a, "127.0.0.1:0")
	if got, err := dialRead(a, ln.Addr().String()); err != nil || got != "hi" {
		t.Fatalf("a -> own 127.0.0.1 = %q, %v", got, err)
	}
	if _, err := dialRead(b, ln.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("b reached a's loopback listener (err %v); want connection refused", err)
	}
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err == nil && !strings.Contains(string(out), a.Netns()) {
		t.Errorf("`ip netns list` does not show %s:\n%s", a.Netns(), out)
	}
}

func TestProcessBindsPodAddresses(t *testing.T) {
	n := newTestNetwork(t)
	a := addPods(t, n, "srv")[0]
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	podAddr := netip.AddrPortFrom(a.IP(), 9000).String()
	log := filepath.Join(t.TempDir(), "srv.log")
	c, err := a.Start(proc.Spec{Path: self, Env: append(os.Environ(), helperEnv+"="+podAddr+",127.0.0.1:9001"),
		LogPath: log, StopGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, log, "ready")
	if got, err := dialRead(a, podAddr); err != nil || got != podAddr {
		t.Errorf("pod IP listener answered %q, %v; want %s", got, err, podAddr)
	}
	if got, err := dialRead(a, "127.0.0.1:9001"); err != nil || got != "127.0.0.1:9001" {
		t.Errorf("loopback listener answered %q, %v", got, err)
	}
	if err := c.Stop(); err != nil {
		t.Error(err)
	}
}

func TestCommandRunsAsProxyUser(t *testing.T) {
	n := newTestNetwork(t)
	a := addPods(t, n, "app")[0]
	c, err := a.Start(proc.Spec{Path: "sleep", Args: []string{"30"}, User: &proc.User{UID: DefaultProxyUID, GID: DefaultProxyGID},
		LogPath: filepath.Join(t.TempDir(), "sidecar.log")})
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c.PID()), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Uid:\t1337\t1337\t1337\t1337", "Gid:\t1337\t1337\t1337\t1337"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("/proc/%d/status lacks %q:\n%s", c.PID(), want, status)
		}
	}
	procNS, err := statNS(filepath.Join("/proc", strconv.Itoa(c.PID()), "ns", "net"))
	if err != nil {
		t.Fatal(err)
	}
	podNS, _ := statNS(filepath.Join(netnsDir, a.Netns()))
	hostNS, _ := statNS("/proc/self/ns/net")
	if procNS != podNS || procNS == hostNS {
		t.Errorf("process namespace %v, pod %v, host %v: want the pod's", procNS, podNS, hostNS)
	}
	start := time.Now()
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Stop of sleep took %v: SIGTERM did not reach it", d)
	}
}
