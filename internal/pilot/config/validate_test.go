package config

import (
	"errors"
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"
	security "istio.io/api/security/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Validate is usable on Resources built in code, not only on decoded ones.
func TestValidateStandalone(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "reviews", Namespace: "default"}
	good := &Resource{Kind: KindDestinationRule, Meta: meta, Spec: &networking.DestinationRule{Host: "reviews"}}
	if err := Validate(good); err != nil {
		t.Errorf("Validate(good) = %v", err)
	}
	tests := []struct {
		name string
		r    *Resource
		want []string
	}{
		{"nil spec", &Resource{Kind: KindGateway, Meta: meta}, []string{"spec: required"}},
		{"wrong spec type", &Resource{Kind: KindSidecar, Meta: meta, Spec: &networking.Gateway{}}, []string{"spec: has Go type *v1alpha3.Gateway"}},
		{"unknown kind", &Resource{Kind: "EnvoyFilter", Meta: meta, Spec: &networking.Gateway{}}, []string{`kind: "EnvoyFilter" is not supported`}},
		{"all problems listed", &Resource{Kind: KindPeerAuthentication, Meta: metav1.ObjectMeta{Name: "Bad"},
			Spec: &security.PeerAuthentication{PortLevelMtls: map[uint32]*security.PeerAuthentication_MutualTLS{0: {}}}},
			[]string{`metadata.name: "Bad"`, "metadata.namespace", "spec.portLevelMtls: needs a selector", "spec.portLevelMtls[0]: port 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.r)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate = %v, want a *ValidationError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestDurationsAsIstioReadsThem(t *testing.T) {
	rs, err := Decode("d.yaml", []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r}\nspec:\n  host: r\n  trafficPolicy:\n    outlierDetection: {interval: 5m, baseEjectionTime: 1h30m}\n    connectionPool: {tcp: {connectTimeout: 250ms}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tp := rs[0].Spec.(*networking.DestinationRule).TrafficPolicy
	if got := tp.OutlierDetection.Interval.AsDuration().String(); got != "5m0s" {
		t.Errorf("interval = %s, want 5m0s", got)
	}
	if got := tp.OutlierDetection.BaseEjectionTime.AsDuration().String(); got != "1h30m0s" {
		t.Errorf("baseEjectionTime = %s, want 1h30m0s", got)
	}
	if got := tp.ConnectionPool.Tcp.ConnectTimeout.AsDuration().String(); got != "250ms" {
		t.Errorf("connectTimeout = %s, want 250ms", got)
	}
}

func TestHostProblem(t *testing.T) {
	for _, h := range []string{"reviews", "reviews.default.svc.cluster.local", "*.example.com", "*", "*foo.example.com", "Example.COM", "istio.io."} {
		if p := hostProblem(h, true); p != "" {
			t.Errorf("hostProblem(%q) = %q, want valid", h, p)
		}
	}
	for _, h := range []string{"", "a..b", "-a.com", "a_b.com", "foo.*.com", "example.123", strings.Repeat("a", 64) + ".com"} {
		if p := hostProblem(h, true); p == "" {
			t.Errorf("hostProblem(%q) accepted an invalid host", h)
		}
	}
	if hostProblem("*.example.com", false) == "" {
		t.Error("wildcard accepted where none is allowed")
	}
}
