package image

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/testenv"
)

// The static proxy, alone in its image with only the /etc/hosts a kubelet
// mounts into a pod, still resolves the control plane's name: glibc's
// static getaddrinfo reads the hosts file without the NSS libraries a
// dynamic glibc would load. It connects to the xDS address it resolved.
func TestStaticProxyResolvesNamesInItsImage(t *testing.T) {
	testenv.NeedRoot(t, "chroot into the unpacked proxy image")
	proxy := testenv.NeedStaticProxy(t, "../../..")
	img, err := ProxyImage(proxy)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, img, root)
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "hosts"), []byte("127.0.0.1 meshperf-pilot.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	xds, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer xds.Close()
	port := xds.Addr().(*net.TCPAddr).Port
	cmd := exec.Command(ProxyPath, "--xds-address", net.JoinHostPort("meshperf-pilot.test", strconv.Itoa(port)), "--admin-address", "127.0.0.1:0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: root}
	cmd.Dir = "/"
	out, err := os.CreateTemp("", "proxy-log-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out.Name())
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := xds.(*net.TCPListener).SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	conn, err := xds.Accept()
	if err != nil {
		log, _ := os.ReadFile(out.Name())
		t.Fatalf("the proxy never connected to meshperf-pilot.test:%d: %v\n%s", port, err, log)
	}
	conn.Close()
}
