package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/meshperf/meshperf/internal/kube/crdmanifest"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// crdsFiles stand for the CRD manifests: one small file per manifest.
func crdsFiles(t *testing.T) []File {
	var out []File
	for _, m := range []crdmanifest.Manifest{crdmanifest.Istio, crdmanifest.GatewayAPI} {
		p := filepath.Join(t.TempDir(), "crds.yaml")
		if err := os.WriteFile(p, []byte("kind: CustomResourceDefinition # "+m.What+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, File{Path: m.ImagePath, Mode: 0o644, Source: p})
	}
	return out
}

// unpack writes the image's layers into dir, bottom first, as a runtime's
// snapshotter would (regular files, directories, symbolic links).
func unpack(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, hdr.Name)
			switch hdr.Typeflag {
			case tar.TypeDir:
				err = os.MkdirAll(p, os.FileMode(hdr.Mode))
			case tar.TypeSymlink:
				err = os.Symlink(hdr.Linkname, p)
			case tar.TypeReg:
				var f *os.File
				if f, err = os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode)); err == nil {
					_, err = io.Copy(f, tr)
					err = errors.Join(err, f.Close())
				}
			default:
				err = fmt.Errorf("unexpected entry type %c", hdr.Typeflag)
			}
			if err != nil {
				t.Fatalf("%s: %v", hdr.Name, err)
			}
		}
		rc.Close()
	}
}

// The meshperf image carries its binary, the CRDs, and an iptables-restore
// that runs inside the image alone (no host file reachable) and installs
// the lab's own capture rules, extensions (owner, REDIRECT) included.
func TestMeshperfImageRunsIptablesRestoreOnItsOwn(t *testing.T) {
	testenv.NeedRoot(t, "chroot into the unpacked image and a network namespace for its rules")
	ip := testenv.NeedCommand(t, "ip", "iproute2")
	nsenter := testenv.NeedCommand(t, "nsenter", "util-linux")
	testenv.NeedCommand(t, "iptables-restore", "iptables")
	exe := testutil.MeshperfBinary(t)
	img, err := MeshperfImage(exe, crdsFiles(t))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, img, root)
	for _, m := range []crdmanifest.Manifest{crdmanifest.Istio, crdmanifest.GatewayAPI} {
		if data, err := os.ReadFile(filepath.Join(root, m.ImagePath)); err != nil || !strings.Contains(string(data), m.What) {
			t.Errorf("%s at %s: %q, %v", m.What, m.ImagePath, data, err)
		}
	}
	if st, err := os.Stat(filepath.Join(root, BinaryPath)); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("%s: %v, %v", BinaryPath, st, err)
	}

	netns := fmt.Sprintf("meshperf-image-test-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", netns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "del", netns).Run() })
	rules := pod.CaptureRules(pod.CaptureOptions{})
	restore := exec.Command(nsenter, "--net=/run/netns/"+netns, "--root="+root, "--wd=/", "/usr/sbin/iptables-restore")
	restore.Env = []string{imagePath}
	restore.Stdin = strings.NewReader(rules)
	if out, err := restore.CombinedOutput(); err != nil {
		t.Fatalf("the image's iptables-restore: %v: %s", err, out)
	}
	saved, err := exec.Command(ip, "netns", "exec", netns, "iptables-save", "-t", "nat").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, saved)
	}
	for _, want := range []string{"-j REDIRECT --to-ports 15001", "--uid-owner 1337", "ISTIO_INBOUND"} {
		if !strings.Contains(string(saved), want) {
			t.Errorf("the pod's nat table lacks %q:\n%s", want, saved)
		}
	}
}

func TestProxyAndMeshperfImagesRefuseDynamicBinaries(t *testing.T) {
	if _, err := ProxyImage("/bin/sh"); err == nil || !strings.Contains(err.Error(), "crt-static") {
		t.Errorf("ProxyImage(dynamic) = %v, want the static build hint", err)
	}
	if _, err := MeshperfImage("/bin/sh", crdsFiles(t)); err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Errorf("MeshperfImage(dynamic) = %v, want the static build hint", err)
	}
}

// loaderSearchDirs follows ld.so.conf's includes in order.
func TestLoaderSearchDirsFollowsIncludes(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conf.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("ld.so.conf", "include conf.d/*.conf\n/opt/lib # trailing\n")
	write("conf.d/b.conf", "/b\n")
	write("conf.d/a.conf", "# comment\n/a\n/b\n")
	got := strings.Join(loaderSearchDirs(filepath.Join(dir, "ld.so.conf")), ":")
	if want := "/a:/b:/opt/lib:/lib:/usr/lib"; got != want {
		t.Errorf("search dirs %s, want %s", got, want)
	}
}
