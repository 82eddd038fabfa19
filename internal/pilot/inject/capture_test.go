package inject

import (
	"errors"
	"slices"
	"testing"

	"github.com/meshperf/meshperf/internal/lab/pod"
)

func TestCaptureOptionsOf(t *testing.T) {
	o, err := CaptureOptionsOf(map[string]string{
		"traffic.sidecar.istio.io/excludeInboundPorts":  "9090,15090",
		"traffic.sidecar.istio.io/excludeOutboundPorts": " 5432 ,",
		"traffic.sidecar.istio.io/includeInboundPorts":  "*", // what the capture does anyway
		"sidecar.istio.io/interceptionMode":             "REDIRECT",
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.ExcludeInboundPorts, []uint16{9090, 15090}) || !slices.Equal(o.ExcludeOutboundPorts, []uint16{5432}) {
		t.Errorf("got %+v", o)
	}
	for name, v := range map[string]string{
		"traffic.sidecar.istio.io/excludeOutboundPorts":    "http",
		"traffic.sidecar.istio.io/excludeInboundPorts":     "70000",
		"traffic.sidecar.istio.io/includeInboundPorts":     "8080",
		"traffic.sidecar.istio.io/excludeOutboundIPRanges": "10.0.0.0/8",
		"sidecar.istio.io/interceptionMode":                "TPROXY",
		"traffic.sidecar.istio.io/includeOutboundIPRanges": "10.0.0.0/8",
		"traffic.sidecar.istio.io/kubevirtInterfaces":      "net1",
	} {
		if _, err := CaptureOptionsOf(map[string]string{name: v}); !errors.Is(err, ErrCannotInject) {
			t.Errorf("%s=%q: %v, want ErrCannotInject", name, v, err)
		}
	}
}

func TestCaptureArgsWriteEveryOption(t *testing.T) {
	got := CaptureArgs(pod.CaptureOptions{ProxyUID: 1500, ExcludeOutboundPorts: []uint16{3306, 5432}})
	want := []string{"--proxy-uid", "1500", "--proxy-gid", "1337", "--outbound-port", "15001", "--inbound-port", "15006", "--exclude-outbound-ports", "3306,5432"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
