package pod

import (
	"strings"
	"testing"
)

func TestCaptureRulesDefaults(t *testing.T) {
	want := `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:ISTIO_INBOUND - [0:0]
:ISTIO_IN_REDIRECT - [0:0]
:ISTIO_OUTPUT - [0:0]
:ISTIO_REDIRECT - [0:0]
-A PREROUTING -p tcp -j ISTIO_INBOUND
-A OUTPUT -p tcp -j ISTIO_OUTPUT
-A ISTIO_INBOUND -p tcp -m tcp --dport 15000 -j RETURN
-A ISTIO_INBOUND -p tcp -m tcp --dport 15020 -j RETURN
-A ISTIO_INBOUND -p tcp -m tcp --dport 15021 -j RETURN
-A ISTIO_INBOUND -p tcp -m tcp --dport 15090 -j RETURN
-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT
-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006
-A ISTIO_OUTPUT -s 127.0.0.6/32 -o lo -j RETURN
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -m owner --uid-owner 1337 -j ISTIO_IN_REDIRECT
-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN
-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN
-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -m owner --gid-owner 1337 -j ISTIO_IN_REDIRECT
-A ISTIO_OUTPUT -o lo -m owner ! --gid-owner 1337 -j RETURN
-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN
-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN
-A ISTIO_OUTPUT -j ISTIO_REDIRECT
-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001
COMMIT
`
	if got := CaptureRules(CaptureOptions{}); got != want {
		t.Errorf("CaptureRules(defaults):\n%s\nwant:\n%s", got, want)
	}
}

func TestCaptureRulesOptions(t *testing.T) {
	got := CaptureRules(CaptureOptions{
		ProxyUID:             2000,
		ProxyGID:             2001,
		OutboundPort:         16001,
		InboundPort:          16006,
		ExcludeInboundPorts:  []uint16{22, 15021, 22}, // duplicates and a standard port collapse
		ExcludeOutboundPorts: []uint16{15012, 443},
	})
	mustContain := []string{
		"-A ISTIO_INBOUND -p tcp -m tcp --dport 22 -j RETURN\n-A ISTIO_INBOUND -p tcp -m tcp --dport 15000 -j RETURN\n",
		"-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 16006\n",
		"-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 16001\n",
		// Outbound exclusions come first, before the owner rules.
		":ISTIO_REDIRECT - [0:0]\n",
		"-A ISTIO_OUTPUT -p tcp -m tcp --dport 443 -j RETURN\n-A ISTIO_OUTPUT -p tcp -m tcp --dport 15012 -j RETURN\n-A ISTIO_OUTPUT -s 127.0.0.6/32",
		"-o lo -m owner --uid-owner 2000 -j ISTIO_IN_REDIRECT\n",
		"-A ISTIO_OUTPUT -m owner --gid-owner 2001 -j RETURN\n",
	}
	for _, s := range mustContain {
		if !strings.Contains(got, s) {
			t.Errorf("rules lack %q:\n%s", s, got)
		}
	}
	if n := strings.Count(got, "--dport 15021 "); n != 1 {
		t.Errorf("port 15021 excluded %d times, want once:\n%s", n, got)
	}
	if n := strings.Count(got, "--dport 22 "); n != 1 {
		t.Errorf("port 22 excluded %d times, want once:\n%s", n, got)
	}
	if strings.Contains(got, "1337") {
		t.Errorf("custom uid/gid still mention 1337:\n%s", got)
	}
}
