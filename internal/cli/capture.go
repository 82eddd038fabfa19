package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/pilot/inject"
)

// Capture is `meshperf capture`: Istio's sidecar capture (pod.CaptureRules,
// the lab's) installed in this process's network namespace. It is the
// command of the istio-init container the injector adds, and takes the
// flags inject.CaptureArgs writes.
func Capture(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf capture", "[flags]",
		"Installs Istio's sidecar capture in this network namespace: inbound TCP to the proxy's 15006, outbound to its 15001, "+
			"the proxy's own traffic (its UID and GID) left alone; one iptables-restore of the nat table, all or nothing. "+
			"It is the command of the istio-init container meshperf's injector adds (needs NET_ADMIN and iptables-restore).")
	def := pod.CaptureOptions{}.WithDefaults()
	var (
		uid, gid, outbound, inbound int
		excludeIn, excludeOut       portsFlag
		print                       bool
	)
	intVar(cmd.flags, &uid, "proxy-uid", int(def.ProxyUID), 1, 1<<31-1, "the proxy's `uid`, whose connections are not captured")
	intVar(cmd.flags, &gid, "proxy-gid", int(def.ProxyGID), 1, 1<<31-1, "the proxy's `gid`, whose connections are not captured")
	intVar(cmd.flags, &outbound, "outbound-port", int(def.OutboundPort), 1, 65535, "the proxy's outbound listener `port`")
	intVar(cmd.flags, &inbound, "inbound-port", int(def.InboundPort), 1, 65535, "the proxy's inbound listener `port`")
	cmd.flags.Var(&excludeIn, "exclude-inbound-ports", "inbound `ports` not captured, comma-separated (besides the proxy's own 15000, 15020, 15021, 15090)")
	cmd.flags.Var(&excludeOut, "exclude-outbound-ports", "destination `ports` the app reaches directly, comma-separated")
	cmd.flags.BoolVar(&print, "print", false, "print the iptables-restore input instead of applying it")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	opts := pod.CaptureOptions{
		ProxyUID: uint32(uid), ProxyGID: uint32(gid), OutboundPort: uint16(outbound), InboundPort: uint16(inbound),
		ExcludeInboundPorts: excludeIn, ExcludeOutboundPorts: excludeOut,
	}
	if print {
		_, _ = io.WriteString(stdout, pod.CaptureRules(opts))
		return exitOK
	}
	if err := pod.ApplyCapture(opts); err != nil {
		return cmd.exit(stderr, err)
	}
	_, _ = fmt.Fprintf(stdout, "meshperf capture: inbound to %d, outbound to %d, uid %d and gid %d not captured\n", inbound, outbound, uid, gid)
	return exitOK
}

// portsFlag is a comma-separated list of ports, as Istio's annotations
// and istio-iptables take them.
type portsFlag []uint16

func (p *portsFlag) String() string {
	s := make([]string, len(*p))
	for i, v := range *p {
		s[i] = fmt.Sprint(v)
	}
	return strings.Join(s, ",")
}

func (p *portsFlag) Set(v string) error {
	ports, err := inject.ParsePorts(v)
	if err != nil {
		return err
	}
	*p = ports
	return nil
}
