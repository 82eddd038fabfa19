package pod

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// Istio's sidecar defaults.
const (
	DefaultProxyUID     = 1337
	DefaultProxyGID     = 1337
	DefaultOutboundPort = 15001 // virtualOutbound listener
	DefaultInboundPort  = 15006 // virtualInbound listener
)

// StandardInboundExcludes are the inbound ports never captured: the proxy's
// own admin (15000), status (15020, 15021) and Prometheus (15090) ports.
var StandardInboundExcludes = []uint16{15000, 15020, 15021, 15090}

// CaptureOptions configures CaptureRules. Zero values mean Istio's defaults;
// consequently the proxy cannot be configured to run as root (uid 0).
type CaptureOptions struct {
	ProxyUID, ProxyGID uint32
	OutboundPort       uint16
	InboundPort        uint16
	// ExcludeInboundPorts are added to StandardInboundExcludes.
	ExcludeInboundPorts []uint16
	// ExcludeOutboundPorts are destination ports the app reaches directly.
	ExcludeOutboundPorts []uint16
}

// WithDefaults fills every zero field with Istio's default.
func (o CaptureOptions) WithDefaults() CaptureOptions {
	if o.ProxyUID == 0 {
		o.ProxyUID = DefaultProxyUID
	}
	if o.ProxyGID == 0 {
		o.ProxyGID = DefaultProxyGID
	}
	if o.OutboundPort == 0 {
		o.OutboundPort = DefaultOutboundPort
	}
	if o.InboundPort == 0 {
		o.InboundPort = DefaultInboundPort
	}
	return o
}

// CaptureRules renders, as iptables-restore input for the nat table, the
// rules Istio's init container (istio-iptables, REDIRECT mode) installs:
//
//   - Inbound: every TCP packet arriving at the pod goes through
//     ISTIO_INBOUND, which leaves the proxy's own ports alone and sends the
//     rest to ISTIO_IN_REDIRECT, i.e. to the inbound listener (15006).
//   - Outbound: every TCP connection the pod opens goes through ISTIO_OUTPUT:
//   - from 127.0.0.6 over lo: the proxy's inbound passthrough reaching the
//     app; leave it.
//   - by the proxy, over lo, to an address other than 127.0.0.1: the proxy
//     forwarding to its own pod's IP (the app called a service whose
//     endpoint is this pod); capture it as inbound, so it gets the server
//     side's policy, instead of letting it reach the app unseen.
//   - by anyone else over lo: the app calling itself (127.0.0.1 or its own
//     pod IP, which routes via lo); leave it.
//   - by the proxy otherwise: its upstream connections; leave them, or
//     they would loop back into it.
//   - the same three rules again by group, then 127.0.0.1: leave it.
//   - everything else goes to ISTIO_REDIRECT, the outbound listener (15001).
//
// The output replaces the whole nat table when applied, so applying it twice
// leaves one copy.
func CaptureRules(opts CaptureOptions) string {
	o := opts.WithDefaults()
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("*nat")
	for _, c := range []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"} {
		w(":%s ACCEPT [0:0]", c)
	}
	for _, c := range []string{"ISTIO_INBOUND", "ISTIO_IN_REDIRECT", "ISTIO_OUTPUT", "ISTIO_REDIRECT"} {
		w(":%s - [0:0]", c)
	}
	w("-A PREROUTING -p tcp -j ISTIO_INBOUND")
	w("-A OUTPUT -p tcp -j ISTIO_OUTPUT")

	for _, port := range sortedPorts(StandardInboundExcludes, o.ExcludeInboundPorts) {
		w("-A ISTIO_INBOUND -p tcp -m tcp --dport %d -j RETURN", port)
	}
	w("-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT")
	w("-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports %d", o.InboundPort)

	for _, port := range sortedPorts(o.ExcludeOutboundPorts) {
		w("-A ISTIO_OUTPUT -p tcp -m tcp --dport %d -j RETURN", port)
	}
	w("-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN")
	for _, m := range []string{fmt.Sprintf("--uid-owner %d", o.ProxyUID), fmt.Sprintf("--gid-owner %d", o.ProxyGID)} {
		w("-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -m owner %s -j ISTIO_IN_REDIRECT", m)
		w("-A ISTIO_OUTPUT -o lo -m owner ! %s -j RETURN", m)
		w("-A ISTIO_OUTPUT -m owner %s -j RETURN", m)
	}
	w("-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN")
	w("-A ISTIO_OUTPUT -j ISTIO_REDIRECT")
	w("-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports %d", o.OutboundPort)
	w("COMMIT")
	return b.String()
}

func sortedPorts(lists ...[]uint16) []uint16 {
	var all []uint16
	for _, l := range lists {
		all = append(all, l...)
	}
	slices.Sort(all)
	return slices.Compact(all)
}

// applyCapture loads rules into the pod's namespace with one
// iptables-restore, which commits the table in a single transaction.
func applyCapture(p *Pod, rules string) error {
	if err := restoreNAT(rules, p.startIn); err != nil {
		return fmt.Errorf("pod %s: capture: %w", p.name, err)
	}
	return nil
}

// ApplyCapture installs CaptureRules(opts) in the calling process's own
// network namespace, atomically: what `meshperf capture` does as a
// Kubernetes pod's init container, the same rules the lab's pods get.
func ApplyCapture(opts CaptureOptions) error {
	if err := restoreNAT(CaptureRules(opts), nil); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return nil
}

// restoreNAT runs iptables-restore with rules, started by launch (nil: in
// this process's namespace).
func restoreNAT(rules string, launch func(*exec.Cmd) error) error {
	bin, err := syscmd.Find("iptables-restore", "iptables")
	if err != nil {
		return err
	}
	// Not registered with a pod: it has ended before this returns.
	c, err := proc.Start(proc.Spec{Name: bin, Path: bin, Args: []string{"--wait"}, Stdin: strings.NewReader(rules), Launch: launch})
	if err != nil {
		return err
	}
	if err := c.Wait(); err != nil {
		return fmt.Errorf("%s: %w: %s", bin, err, strings.TrimSpace(c.Tail()))
	}
	return nil
}
