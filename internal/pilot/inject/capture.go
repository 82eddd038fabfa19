package inject

import (
	"fmt"
	"strconv"
	"strings"

	"istio.io/api/annotation"

	"github.com/meshperf/meshperf/internal/lab/pod"
)

// unsupportedCapture are Istio's capture annotations meshperf's capture
// (pod.CaptureRules) has no counterpart for, with the one value each may
// take because it is what the rules do anyway. A pod asking for anything
// else is not injected: a sidecar that silently captured differently from
// what the pod asked would measure the wrong thing.
var unsupportedCapture = map[string]string{
	annotation.SidecarTrafficIncludeInboundPorts.Name:     "*",
	annotation.SidecarTrafficIncludeOutboundIPRanges.Name: "*",
	annotation.SidecarTrafficExcludeOutboundIPRanges.Name: "",
	annotation.SidecarTrafficIncludeOutboundPorts.Name:    "",
	annotation.SidecarTrafficExcludeInterfaces.Name:       "",
	annotation.SidecarTrafficKubevirtInterfaces.Name:      "",
	annotation.SidecarInterceptionMode.Name:               "REDIRECT",
}

// CaptureOptionsOf reads the capture annotations of a pod (Istio's
// traffic.sidecar.istio.io/excludeInboundPorts and excludeOutboundPorts;
// the others only at the value meshperf's capture implies).
func CaptureOptionsOf(annotations map[string]string) (pod.CaptureOptions, error) {
	var o pod.CaptureOptions
	for name, want := range unsupportedCapture {
		if v, ok := annotations[name]; ok && strings.TrimSpace(v) != want {
			return o, cannot("annotation %s=%q: meshperf's capture supports only %q", name, v, want)
		}
	}
	var err error
	if o.ExcludeInboundPorts, err = portList(annotations, annotation.SidecarTrafficExcludeInboundPorts.Name); err != nil {
		return o, err
	}
	if o.ExcludeOutboundPorts, err = portList(annotations, annotation.SidecarTrafficExcludeOutboundPorts.Name); err != nil {
		return o, err
	}
	return o, nil
}

func portList(annotations map[string]string, name string) ([]uint16, error) {
	v := annotations[name]
	if v == "" {
		return nil, nil
	}
	ports, err := ParsePorts(v)
	if err != nil {
		return nil, cannot("annotation %s: %v", name, err)
	}
	return ports, nil
}

// ParsePorts reads a comma-separated list of ports, as Istio's annotations
// and istio-iptables' flags take them.
func ParsePorts(s string) ([]uint16, error) {
	var ports []uint16
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseUint(f, 10, 16)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("%q is not a port (1-65535) in %q", f, s)
		}
		ports = append(ports, uint16(n))
	}
	return ports, nil
}

// CaptureArgs are `meshperf capture`'s flags for opts (Istio's defaults
// written out, so that the init container's command says what it does).
func CaptureArgs(opts pod.CaptureOptions) []string {
	o := opts.WithDefaults()
	args := []string{
		"--proxy-uid", strconv.FormatUint(uint64(o.ProxyUID), 10),
		"--proxy-gid", strconv.FormatUint(uint64(o.ProxyGID), 10),
		"--outbound-port", strconv.Itoa(int(o.OutboundPort)),
		"--inbound-port", strconv.Itoa(int(o.InboundPort)),
	}
	if len(o.ExcludeInboundPorts) > 0 {
		args = append(args, "--exclude-inbound-ports", joinPorts(o.ExcludeInboundPorts))
	}
	if len(o.ExcludeOutboundPorts) > 0 {
		args = append(args, "--exclude-outbound-ports", joinPorts(o.ExcludeOutboundPorts))
	}
	return args
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}
