package pod

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/meshperf/meshperf/internal/proc"
)

// arrival is one accepted connection: which listener took it and where the
// client meant to go (SO_ORIGINAL_DST, for redirected connections).
type arrival struct {
	listener string
	origDst  netip.AddrPort
	err      error
}

// originalDst reads where a REDIRECTed connection was going. The kernel
// answers SOL_IP/SO_ORIGINAL_DST with a sockaddr_in (16 bytes); x/sys has no
// getter of that shape, so the 20-byte IPv6Mreq getter is borrowed as a
// buffer large enough for it: bytes 2-3 are the port, 4-7 the address.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	raw, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		mreq, sockErr = unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if sockErr != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", sockErr)
	}
	b := mreq.Multiaddr
	addr := netip.AddrFrom4([4]byte{b[4], b[5], b[6], b[7]})
	return netip.AddrPortFrom(addr, binary.BigEndian.Uint16(b[2:4])), nil
}

// watch listens on addr in p and reports each connection on arrivals.
func watch(t *testing.T, p *Pod, label, addr string, arrivals chan<- arrival) {
	t.Helper()
	serveIn(t, p, addr, func(c net.Conn) {
		a := arrival{listener: label}
		a.origDst, a.err = originalDst(c)
		arrivals <- a
		c.Write([]byte("ok\n"))
	})
}

func expectArrival(t *testing.T, what string, arrivals <-chan arrival, listener string, origDst netip.AddrPort) {
	t.Helper()
	select {
	case a := <-arrivals:
		if a.listener != listener {
			t.Errorf("%s: arrived at %s, want %s", what, a.listener, listener)
			return
		}
		if origDst.IsValid() && (a.err != nil || a.origDst != origDst) {
			t.Errorf("%s: original destination %v (err %v), want %v", what, a.origDst, a.err, origDst)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("%s: no connection arrived anywhere within 5s", what)
	}
}

// dialExpect connects to addr from inside p as the app and expects the
// connection at listener (with origDst as its original destination, when
// valid).
func dialExpect(t *testing.T, what string, p *Pod, addr string, arrivals <-chan arrival, listener string, origDst netip.AddrPort) {
	t.Helper()
	if _, err := dialRead(p, addr); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	expectArrival(t, what, arrivals, listener, origDst)
}

// dialAsProxy connects to addr from inside p as uid/gid 1337, the way the
// sidecar's own connections leave the pod.
func dialAsProxy(t *testing.T, p *Pod, addr netip.AddrPort) {
	t.Helper()
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%d && read -t 5 line <&3 && echo got:$line", addr.Addr(), addr.Port())
	c, err := p.Start(proc.Spec{Path: "bash", Args: []string{"-c", script}, User: &proc.User{UID: DefaultProxyUID, GID: DefaultProxyGID},
		LogPath: filepath.Join(t.TempDir(), "proxy-dial.log")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Errorf("uid 1337 dial of %s from %s: %v", addr, p.Name(), err)
	}
}

func TestCaptureRedirectsAsIstio(t *testing.T) {
	n := newTestNetwork(t)
	pods := addPods(t, n, "client", "server")
	a, b := pods[0], pods[1] // a has the sidecar capture
	if err := a.Capture(CaptureOptions{ExcludeInboundPorts: []uint16{9999}}); err != nil {
		t.Fatal(err)
	}
	// A second Capture replaces rather than duplicates.
	if err := a.Capture(CaptureOptions{ExcludeInboundPorts: []uint16{9999}}); err != nil {
		t.Fatal(err)
	}
	arrivals := make(chan arrival, 16)
	watch(t, a, "a:15001", ":15001", arrivals)
	watch(t, a, "a:15006", ":15006", arrivals)
	watch(t, a, "a:15021", ":15021", arrivals)
	watch(t, a, "a:9999", ":9999", arrivals)
	aApp := netip.AddrPortFrom(a.IP(), 8080)
	watch(t, a, "a:8080", aApp.String(), arrivals)
	bApp := netip.AddrPortFrom(b.IP(), 8080)
	watch(t, b, "b:8080", bApp.String(), arrivals)

	// The app's outbound call is redirected to the outbound listener.
	dialExpect(t, "app a -> b:8080", a, bApp.String(), arrivals, "a:15001", bApp)

	// The proxy's own outbound call leaves the pod untouched.
	dialAsProxy(t, a, bApp)
	expectArrival(t, "proxy (uid 1337) a -> b:8080", arrivals, "b:8080", netip.AddrPort{})

	// Inbound traffic to the app port lands on the inbound listener...
	dialExpect(t, "b -> a:8080", b, aApp.String(), arrivals, "a:15006", aApp)

	// ...except for the proxy's status port and caller-given ports.
	for _, port := range []uint16{15021, 9999} {
		dst := netip.AddrPortFrom(a.IP(), port)
		dialExpect(t, "b -> "+dst.String(), b, dst.String(), arrivals, fmt.Sprintf("a:%d", port), netip.AddrPort{})
	}

	// The app calling its own pod IP goes over lo, straight to itself.
	dialExpect(t, "app a -> own a:8080", a, aApp.String(), arrivals, "a:8080", netip.AddrPort{})

	// The proxy calling its own pod IP (an endpoint that is this pod) is
	// captured as inbound, so the server side of the proxy sees it.
	dialAsProxy(t, a, aApp)
	expectArrival(t, "proxy (uid 1337) a -> own a:8080", arrivals, "a:15006", aApp)

	// The pod without capture is unaffected: b calling a's excluded port
	// worked above, and b calling itself reaches its app directly.
	dialExpect(t, "b -> own b:8080", b, bApp.String(), arrivals, "b:8080", netip.AddrPort{})
}

func TestCaptureIsAllOrNothing(t *testing.T) {
	n := newTestNetwork(t)
	p := addPods(t, n, "app")[0]
	good := CaptureRules(CaptureOptions{})
	bad := strings.Replace(good, "COMMIT\n", "-A ISTIO_OUTPUT -j NO_SUCH_CHAIN\nCOMMIT\n", 1)
	if err := applyCapture(p, bad); err == nil || !strings.Contains(err.Error(), "iptables-restore") {
		t.Fatalf("applying a bad ruleset: %v; want an iptables-restore error", err)
	}
	out, err := exec.Command("ip", "netns", "exec", p.Netns(), "iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	if strings.Contains(string(out), "ISTIO") {
		t.Errorf("a failed capture left rules behind:\n%s", out)
	}
	if err := p.Capture(CaptureOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ = exec.Command("ip", "netns", "exec", p.Netns(), "iptables-save", "-t", "nat").CombinedOutput()
	if c := strings.Count(string(out), "REDIRECT --to-ports 15001"); c != 1 {
		t.Errorf("after Capture, %d outbound redirect rules, want 1:\n%s", c, out)
	}
}
