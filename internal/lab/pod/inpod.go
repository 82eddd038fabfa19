package pod

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
)

// The in-pod (ambient) redirection's numbers, as istio-cni and ztunnel use
// them. A node proxy opens its listeners inside each pod it serves and marks
// every socket it makes there with InpodMark, which is how the rules tell
// its traffic from the app's.
const (
	InpodMark     = 0x539 // on the node proxy's own sockets in the pod
	InpodMarkMask = 0xfff
	// inpodConnMark tags connections whose first packet arrived marked, so
	// that their replies, which the pod's stack sends unmarked, are marked
	// again and routed back through the local table.
	inpodConnMark = 0x111
	// InpodRouteTable routes marked packets to the pod's own stack: the node
	// proxy keeps the original source address on what it delivers.
	InpodRouteTable = 100
	// inpodRulePriority is the policy rule's place, just before the main
	// table's (32766), as istio-cni puts it.
	inpodRulePriority = 32764
	HBONEPort         = 15008 // the node proxy's HBONE listener in the pod
)

// InpodRules renders, as iptables-restore input for the mangle and nat
// tables, the rules istio-cni installs inside a pod enrolled in ambient:
//
//   - Inbound (nat PREROUTING): TCP to any port but HBONE's, not from the
//     node proxy, goes to its plain-text inbound listener (15006); HBONE
//     (15008) reaches the node proxy's listener as it is.
//   - Outbound (nat OUTPUT): TCP the app opens to anything but 127.0.0.1
//     goes to the node proxy's outbound listener (15001); the node proxy's
//     own sockets (marked) and the pod calling itself over lo are left
//     alone.
//   - mangle: a marked packet arriving marks its connection, and the
//     connection's mark is put back on the packets the pod sends in it, so
//     that the node proxy's connections with a spoofed source stay its own
//     both ways (with the route table InpodRoute adds).
//
// DNS capture (15053) is off in the lab (ISTIO_META_DNS_CAPTURE=false) and
// there is no kubelet probing the pod, so istio-cni's DNS and probe rules
// are left out. Like CaptureRules, the output replaces the tables it names.
func InpodRules() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	mark := fmt.Sprintf("0x%x/0x%x", InpodMark, InpodMarkMask)
	connMark := fmt.Sprintf("0x%x/0x%x", inpodConnMark, InpodMarkMask)
	chains := func(builtin ...string) {
		for _, c := range builtin {
			w(":%s ACCEPT [0:0]", c)
		}
		w(":ISTIO_OUTPUT - [0:0]")
		w(":ISTIO_PRERT - [0:0]")
		w("-A PREROUTING -j ISTIO_PRERT")
		w("-A OUTPUT -j ISTIO_OUTPUT")
	}
	w("*mangle")
	chains("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")
	w("-A ISTIO_OUTPUT -m connmark --mark %s -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff", connMark)
	w("-A ISTIO_PRERT -m mark --mark %s -j CONNMARK --set-xmark %s", mark, connMark)
	w("COMMIT")
	w("*nat")
	chains("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")
	w("-A ISTIO_OUTPUT -p tcp -m mark --mark %s -j ACCEPT", connMark)
	w("-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -j ACCEPT")
	w("-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark %s -j REDIRECT --to-ports %d", mark, DefaultOutboundPort)
	w("-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp -m tcp ! --dport %d -m mark ! --mark %s -j REDIRECT --to-ports %d", HBONEPort, mark, DefaultInboundPort)
	w("COMMIT")
	return b.String()
}

// emptyTables clears what either capture installed: iptables-restore
// replaces each table it is given with the (empty) one given.
const emptyTables = "*mangle\nCOMMIT\n*nat\nCOMMIT\n"

// CaptureInpod installs the ambient in-pod redirection (InpodRules and the
// local route for marked packets) in the pod's namespace, replacing any
// capture it had, as when the pod is enrolled in ambient.
func (p *Pod) CaptureInpod() error {
	if p.kind != KindNetns {
		return fmt.Errorf("pod %s: %w", p.name, ErrCaptureNeedsNetns)
	}
	if err := p.checkOpen(); err != nil {
		return err
	}
	if err := applyCapture(p, InpodRules()); err != nil {
		return err
	}
	return p.inpodRoute(true)
}

// inpodRoute adds (or removes) what `ip route add local 0.0.0.0/0 dev lo
// table 100` and `ip rule add fwmark 0x111/0xfff lookup 100` would: packets
// of marked connections are delivered locally, whatever their address.
// Adding is idempotent, and removing what is not there is not an error.
func (p *Pod) inpodRoute(add bool) error {
	h, err := netlink.NewHandleAt(p.ns)
	if err != nil {
		return fmt.Errorf("pod %s: netlink: %w", p.name, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("pod %s: find lo: %w", p.name, err)
	}
	route := &netlink.Route{LinkIndex: lo.Attrs().Index, Table: InpodRouteTable, Type: syscall.RTN_LOCAL,
		Scope: netlink.SCOPE_HOST, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}}
	rule := netlink.NewRule()
	rule.Family, rule.Priority, rule.Table = netlink.FAMILY_V4, inpodRulePriority, InpodRouteTable
	mask := uint32(InpodMarkMask)
	rule.Mark, rule.Mask = inpodConnMark, &mask
	if add {
		if err := h.RouteReplace(route); err != nil {
			return fmt.Errorf("pod %s: local route in table %d: %w", p.name, InpodRouteTable, err)
		}
		// Replace the rule rather than add a second copy.
		_ = h.RuleDel(rule)
		if err := h.RuleAdd(rule); err != nil {
			return fmt.Errorf("pod %s: rule fwmark 0x%x lookup %d: %w", p.name, inpodConnMark, InpodRouteTable, err)
		}
		return nil
	}
	var errs []error
	if err := h.RuleDel(rule); err != nil && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("pod %s: remove rule lookup %d: %w", p.name, InpodRouteTable, err))
	}
	if err := h.RouteDel(route); err != nil && !errors.Is(err, syscall.ESRCH) && !errors.Is(err, syscall.ENOENT) {
		errs = append(errs, fmt.Errorf("pod %s: remove local route in table %d: %w", p.name, InpodRouteTable, err))
	}
	return errors.Join(errs...)
}
