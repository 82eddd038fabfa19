package cli

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/meshperf/meshperf/internal/kube/image"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// runMeshperf runs the static meshperf binary and returns its stdout,
// failing the test on a non-zero exit.
func runMeshperf(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(testutil.MeshperfBinary(t), args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("meshperf %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// startContainerd starts a containerd of the test's own (its root, state
// and socket in a temporary directory, no CRI) and returns its socket.
func startContainerd(t *testing.T) string {
	t.Helper()
	testenv.NeedRoot(t, "containerd")
	containerd := testenv.NeedCommand(t, "containerd", "containerd")
	testenv.NeedCommand(t, "runc", "runc")
	// A short path: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "mp-ctd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, sock+".ttrpc")
	if err := os.WriteFile(filepath.Join(dir, "config.toml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	startLogged(t, "containerd", exec.Command(containerd, "--config", filepath.Join(dir, "config.toml")))
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := os.Stat(sock)
		return err
	})
	return sock
}

// The images built from the static binaries import into a real containerd
// under their names and run there: the meshperf image's own binary and
// iptables-restore, the proxy, and pause as the sandbox's entrypoint.
func TestImageBuildImportAndRunInContainerd(t *testing.T) {
	sock := startContainerd(t)
	ctr := testenv.NeedCommand(t, "ctr", "containerd")
	proxy := testenv.NeedStaticProxy(t, "../..")
	out := t.TempDir()
	built := runMeshperf(t, "image", "build", "--proxy", proxy, "--out", out, "--tag", "import-test")
	for _, name := range []string{image.Meshperf, image.Proxy, image.Pause} {
		line := fmt.Sprintf(`(?m)^meshperf\.local/%s:import-test@sha256:[0-9a-f]{64}\t%s$`, name, regexp.QuoteMeta(filepath.Join(out, image.ArchiveName(name))))
		if !regexp.MustCompile(line).MatchString(built) {
			t.Errorf("image build printed\n%s\nwithout a line for %s", built, name)
		}
	}
	imported := runMeshperf(t, "image", "import", "--containerd", sock, out)
	if n := strings.Count(imported, "imported meshperf.local/"); n != 3 {
		t.Errorf("image import printed %d imports:\n%s", n, imported)
	}
	ctrRun := func(args ...string) string {
		t.Helper()
		full := append([]string{"--address", sock, "--namespace", image.ContainerdNamespace}, args...)
		got, err := exec.Command(ctr, full...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %s: %v: %s", strings.Join(args, " "), err, got)
		}
		return string(got)
	}
	listed := ctrRun("images", "ls", "-q")
	for _, name := range []string{image.Meshperf, image.Proxy, image.Pause} {
		if !slices.Contains(strings.Fields(listed), "meshperf.local/"+name+":import-test") {
			t.Errorf("ctr images ls lacks %s:\n%s", name, listed)
		}
	}
	if got := ctrRun("run", "--rm", "meshperf.local/meshperf:import-test", "t-iptables", "iptables-restore", "--version"); !strings.Contains(got, "iptables-restore v") {
		t.Errorf("iptables-restore in the meshperf image printed %q", got)
	}
	if got := ctrRun("run", "--rm", "meshperf.local/meshperf:import-test", "t-meshperf", image.BinaryPath, "version"); !strings.HasPrefix(got, "meshperf ") {
		t.Errorf("meshperf version in its image printed %q", got)
	}
	if got := ctrRun("run", "--rm", "meshperf.local/meshperf-proxy:import-test", "t-proxy", image.ProxyPath, "--help"); !strings.Contains(got, "Usage") {
		t.Errorf("meshperf-proxy --help in its image printed %q", got)
	}
	if got := ctrRun("run", "--rm", "meshperf.local/pause:import-test", "t-pause", image.BinaryPath, "pause", "-h"); !strings.Contains(got, "meshperf pause") {
		t.Errorf("meshperf pause -h in the pause image printed %q", got)
	}
}

// Pushed to a real registry (go-containerregistry's, on loopback), the
// images pull back with the digests push printed; an unreachable registry
// is one line and exit status 1.
func TestImagePushToARegistryAndPullBack(t *testing.T) {
	proxy := testenv.NeedStaticProxy(t, "../..")
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	repo := strings.TrimPrefix(srv.URL, "http://") + "/team"
	pushed := runMeshperf(t, "image", "push", "--image-repo", repo, "--tag", "push-test", "--proxy", proxy)
	pushedLine := regexp.MustCompile(`(?m)^pushed (\S+:push-test)@(sha256:[0-9a-f]{64})$`)
	matches := pushedLine.FindAllStringSubmatch(pushed, -1)
	if len(matches) != 3 {
		t.Fatalf("image push printed:\n%s\nwant three pushed lines", pushed)
	}
	for _, m := range matches {
		ref, err := name.ParseReference(m[1])
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(ref)
		if err != nil {
			t.Fatalf("pulling %s back: %v", ref, err)
		}
		digest, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if digest.String() != m[2] {
			t.Errorf("%s pulled back as %s, pushed as %s", ref, digest, m[2])
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if len(cf.Config.Entrypoint) == 0 || !strings.HasPrefix(cf.Config.Entrypoint[0], "/usr/local/bin/meshperf") {
			t.Errorf("%s: entrypoint %q", ref, cf.Config.Entrypoint)
		}
	}

	var stderr bytes.Buffer
	cmd := exec.Command(testutil.MeshperfBinary(t), "image", "push", "--image-repo", "127.0.0.1:1/team", "--proxy", proxy)
	cmd.Stderr = &stderr
	err := cmd.Run()
	if code := cmd.ProcessState.ExitCode(); err == nil || code != exitFailed {
		t.Fatalf("push to a closed port: %v (exit %d), want exit status 1", err, code)
	}
	if lines := strings.Count(stderr.String(), "\n"); lines != 1 || !strings.Contains(stderr.String(), "registry 127.0.0.1:1 unreachable") {
		t.Errorf("push to a closed port said (%d lines):\n%s", lines, stderr.String())
	}
}
