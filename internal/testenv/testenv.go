// Package testenv is how a test says what it needs from the machine: root,
// a system command, the sidecar binary. When something is missing the test
// is skipped with one message naming it and how to get it, so a run on a
// machine without root or without a package stays green but says what it
// did not test; scripts/test lists those skips at the end.
//
// With MESHPERF_TEST_REQUIRE_ALL=1 (CI, which runs as root after
// scripts/setup installed every package) a missing requirement fails the
// test instead, so that a full run cannot quietly turn into a partial one.
package testenv

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/kube/dist"
	"github.com/meshperf/meshperf/internal/syscmd"
	"github.com/meshperf/meshperf/internal/testutil"
)

// RequireAllEnv names the variable that turns skips into failures.
const RequireAllEnv = "MESHPERF_TEST_REQUIRE_ALL"

// Missing skips t, or fails it under RequireAllEnv: what is the missing
// thing, how says how to get it. Every skip message starts with "needs " so
// that the summary reads as a list of what this machine lacks.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if os.Getenv(RequireAllEnv) == "1" {
		t.Fatalf("needs %s: %s (%s=1: nothing may be skipped)", what, how, RequireAllEnv)
		return
	}
	t.Skipf("needs %s: %s", what, how)
}

// NeedRoot skips t unless it runs as root; why says what root is for.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root", why)
	}
}

// NeedCommand skips t unless the system command is installed, and returns
// its path.
func NeedCommand(t testing.TB, command, debianPackage string) string {
	t.Helper()
	p, err := syscmd.Find(command, debianPackage)
	if err != nil {
		Missing(t, debianPackage, err.Error())
	}
	return p
}

// NeedNetns skips t unless it can build the lab's pods: network namespaces,
// veths and a bridge (root), `ip` (iproute2) and Istio's capture rules
// (iptables-restore).
func NeedNetns(t testing.TB) {
	t.Helper()
	NeedRoot(t, "creates network namespaces, veths, a bridge and iptables rules")
	NeedCommand(t, "ip", "iproute2")
	NeedCommand(t, "iptables-restore", "iptables")
}

// FortioEnv names the Fortio binary the interoperability tests run; the
// test set-up (scripts/setup test) installs Fortio there and scripts/test
// sets it.
const FortioEnv = "MESHPERF_FORTIO_BIN"

// NeedFortio skips t unless a Fortio binary is given by FortioEnv or is on
// PATH, and returns its path.
func NeedFortio(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(FortioEnv); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		Missing(t, "fortio", FortioEnv+"="+p+" does not exist; run bash scripts/setup test")
		return ""
	}
	p, err := exec.LookPath("fortio")
	if err != nil {
		Missing(t, "fortio", "not on PATH and "+FortioEnv+" is not set; bash scripts/setup test installs it in bin/tools")
	}
	return p
}

// MeshperfWithProxy copies meshperf (testutil.MeshperfBinary: MESHPERF_BIN,
// or one built once) into a directory of the test's own with
// meshperf-proxy beside it, where the commands that start sidecars look
// first, and returns meshperf's path:
// the commands start their children (pilot, echo server, load) from their
// own executable, so the test runs this binary, not itself. repoRoot is
// the module root from the test's package; the proxy is
// MESHPERF_PROXY_BIN, the Cargo release build or bin/meshperf-proxy, and
// the test is skipped without one.
func MeshperfWithProxy(t testing.TB, repoRoot string) string {
	t.Helper()
	proxy := ProxyBinary(t, repoRoot)
	if proxy == "" {
		return ""
	}
	dir := t.TempDir()
	meshperf := filepath.Join(dir, "meshperf")
	if out, err := exec.Command("cp", testutil.MeshperfBinary(t), meshperf).CombinedOutput(); err != nil {
		t.Fatalf("copy meshperf: %v\n%s", err, out)
	}
	if err := os.Symlink(proxy, filepath.Join(dir, "meshperf-proxy")); err != nil {
		t.Fatal(err)
	}
	return meshperf
}

// ProxyBinary is meshperf-proxy for tests that run it themselves:
// MESHPERF_PROXY_BIN, the Cargo release build or repoRoot's
// bin/meshperf-proxy; t is skipped without one.
func ProxyBinary(t testing.TB, repoRoot string) string {
	t.Helper()
	proxy := os.Getenv("MESHPERF_PROXY_BIN")
	for _, p := range []string{"proxy/target/release/meshperf-proxy", "bin/meshperf-proxy"} {
		if proxy != "" {
			break
		}
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err == nil {
			proxy, _ = filepath.Abs(filepath.Join(repoRoot, p))
		}
	}
	if proxy == "" {
		Missing(t, "meshperf-proxy", "run `cd proxy && cargo build --release` or set MESHPERF_PROXY_BIN")
	}
	return proxy
}

// NeedKubernetes skips t unless the pinned Kubernetes binaries are built
// (internal/kube/dist; `meshperf cluster build`), and returns them.
func NeedKubernetes(t testing.TB) dist.Bins {
	t.Helper()
	b, err := dist.Find()
	if err != nil {
		Missing(t, "Kubernetes "+dist.KubernetesVersion, err.Error())
	}
	return b
}

// NeedStaticProxy skips t unless a statically linked meshperf-proxy is
// built, as meshperf's images need it, and returns its path:
// MESHPERF_PROXY_BIN when it is static (scripts/test sets it to
// bin/meshperf-proxy), else repoRoot's bin/meshperf-proxy when static.
func NeedStaticProxy(t testing.TB, repoRoot string) string {
	t.Helper()
	for _, p := range []string{os.Getenv("MESHPERF_PROXY_BIN"), filepath.Join(repoRoot, "bin", "meshperf-proxy")} {
		if p != "" && isStaticELF(p) {
			abs, err := filepath.Abs(p)
			if err != nil {
				t.Fatal(err)
			}
			return abs
		}
	}
	Missing(t, "a static meshperf-proxy", "run `bash scripts/build proxy` (bin/meshperf-proxy) or set MESHPERF_PROXY_BIN to one")
	return ""
}

// isStaticELF says whether path is an executable that names no dynamic
// loader (no PT_INTERP), so that it runs in an image from scratch.
func isStaticELF(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// IstiodEnv names the variable that gives the tests an istiod: the path of
// a pilot-discovery built from istio/istio, which meshperf never ships.
const IstiodEnv = "MESHPERF_ISTIOD_BIN"

// NeedIstiod skips t unless IstiodEnv names an executable pilot-discovery,
// and returns its path. It skips even under RequireAllEnv: no machine
// meshperf sets up has istiod (the user builds and gives it), so CI cannot
// be asked for it.
func NeedIstiod(t testing.TB) string {
	t.Helper()
	p := os.Getenv(IstiodEnv)
	if p == "" {
		t.Skipf("needs istiod: set %s to a pilot-discovery built from istio/istio (go build ./pilot/cmd/pilot-discovery)", IstiodEnv)
	}
	if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		t.Fatalf("%s=%s: not an executable file", IstiodEnv, p)
	}
	return p
}
