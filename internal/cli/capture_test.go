package cli

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/pilot/inject"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// The init container's command line, as the injector writes it, is read
// back by meshperf capture into the same rules.
func TestCaptureReadsTheInjectorsArgs(t *testing.T) {
	opts := pod.CaptureOptions{ProxyUID: 1500, ExcludeInboundPorts: []uint16{9090}, ExcludeOutboundPorts: []uint16{5432, 6379}}
	var stdout, stderr bytes.Buffer
	if code := Capture(append(inject.CaptureArgs(opts), "--print"), &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := pod.CaptureRules(opts); stdout.String() != want {
		t.Errorf("rules:\n%s\nwant:\n%s", stdout.String(), want)
	}
}

// meshperf capture in a network namespace of its own (as an init
// container runs in its pod's) leaves the rules there.
func TestCaptureAppliesRulesInItsNamespace(t *testing.T) {
	testenv.NeedRoot(t, "installs iptables rules in a new network namespace")
	unshare := testenv.NeedCommand(t, "unshare", "util-linux")
	save := testenv.NeedCommand(t, "iptables-save", "iptables")
	testenv.NeedCommand(t, "iptables-restore", "iptables")
	bin := testutil.MeshperfBinary(t)
	out, err := exec.Command(unshare, "--net", "--", "sh", "-c",
		`"$0" capture --exclude-outbound-ports 5432 && "$1" -t nat`, bin, save).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for _, want := range []string{
		"meshperf capture: inbound to 15006, outbound to 15001",
		"-A ISTIO_OUTPUT -p tcp -m tcp --dport 5432 -j RETURN",
		"-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN",
		"-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006",
		"-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}
