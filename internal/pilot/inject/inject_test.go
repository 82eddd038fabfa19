package inject

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWorkloadName(t *testing.T) {
	yes := true
	owned := func(kind, name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-", Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}}}
	}
	for _, c := range []struct {
		pod  *corev1.Pod
		want string
	}{
		{owned("ReplicaSet", "server-5d9f8c7b6", map[string]string{"pod-template-hash": "5d9f8c7b6"}), "server"},
		{owned("ReplicaSet", "server-5d9f8c7b6", nil), "server-5d9f8c7b6"}, // a ReplicaSet of its own
		{owned("ReplicaSet", "server-5d9f8c7b6", map[string]string{"pod-template-hash": "x"}), "server-5d9f8c7b6"},
		{owned("StatefulSet", "db", nil), "db"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo"}}, "echo"},
		{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "job-"}}, "job"},
	} {
		if got := WorkloadName(c.pod); got != c.want {
			t.Errorf("WorkloadName(%s owned by %v, labels %v) = %q, want %q", c.pod.GenerateName+c.pod.Name, c.pod.OwnerReferences, c.pod.Labels, got, c.want)
		}
	}
}

func TestProxySettingsOf(t *testing.T) {
	s, err := proxySettingsOf(nil)
	if err != nil || s.concurrency != 2 || s.resources.Requests.Cpu().String() != "100m" ||
		s.resources.Requests.Memory().String() != "128Mi" || len(s.resources.Limits) != 0 {
		t.Fatalf("defaults: %+v, %v; want concurrency 2, requests 100m/128Mi, no limits", s, err)
	}
	s, err = proxySettingsOf(map[string]string{
		"proxy.istio.io/config":             "concurrency: 4\ntracing: {}\n",
		"sidecar.istio.io/proxyCPU":         "1",
		"sidecar.istio.io/proxyMemoryLimit": "64Mi",
		"sidecar.istio.io/proxyCPULimit":    "1500m",
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.concurrency != 4 || s.concurrencyEnv() != "4" {
		t.Errorf("concurrency %d, want 4", s.concurrency)
	}
	r := s.resources
	if r.Requests.Cpu().String() != "1" || r.Limits.Cpu().String() != "1500m" || r.Limits.Memory().String() != "64Mi" ||
		r.Requests.Memory().String() != "64Mi" {
		t.Errorf("resources %+v; want requests cpu 1 and memory 64Mi (down to its limit), limits 1500m/64Mi", r)
	}
	for _, bad := range []map[string]string{
		{"proxy.istio.io/config": "concurrency: [1"},
		{"proxy.istio.io/config": "concurrency: 0"},
		{"proxy.istio.io/config": "concurrency: 2.5"},
		{"proxy.istio.io/config": "concurrency: two"},
		{"proxy.istio.io/config": "concurrency: 1000"},
		{"sidecar.istio.io/proxyCPU": "lots"},
		{"sidecar.istio.io/proxyMemory": "-1Mi"},
		{"sidecar.istio.io/proxyCPULimit": "0"},
	} {
		if _, err := proxySettingsOf(bad); !errors.Is(err, ErrCannotInject) {
			t.Errorf("%v: err %v, want ErrCannotInject", bad, err)
		}
	}
}

func FuzzProxySettingsOf(f *testing.F) {
	f.Add("concurrency: 3", "250m", "1Gi")
	f.Add("{concurrency: 1e3}", "1e-3", "0.5")
	f.Fuzz(func(t *testing.T, config, cpu, memory string) {
		s, err := proxySettingsOf(map[string]string{"proxy.istio.io/config": config,
			"sidecar.istio.io/proxyCPU": cpu, "sidecar.istio.io/proxyMemoryLimit": memory})
		if err != nil {
			if !errors.Is(err, ErrCannotInject) {
				t.Fatalf("error %v does not wrap ErrCannotInject", err)
			}
			return
		}
		if s.concurrency < 1 || s.concurrency > maxProxyConcurrency {
			t.Fatalf("concurrency %d accepted", s.concurrency)
		}
		if l, ok := s.resources.Limits[corev1.ResourceMemory]; ok && s.resources.Requests.Memory().Cmp(l) > 0 {
			t.Fatalf("request %s above limit %s", s.resources.Requests.Memory(), &l)
		}
	})
}

// The sidecar is told the mesh's trust domain (TRUST_DOMAIN, as Istio's
// injector does), Istio's default when the mesh config names none.
func TestSidecarGetsTheTrustDomain(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "echo-1", Namespace: "shop"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.test/echo:1"}}}}
	for _, tc := range []struct{ set, want string }{{"", "cluster.local"}, {"example.org", "example.org"}} {
		inj, err := Options{Tag: "v9", TrustDomain: tc.set}.Sidecar(pod)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range inj.Proxy.Env {
			if e.Name == "TRUST_DOMAIN" {
				got = append(got, e.Value)
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("trust domain %q: TRUST_DOMAIN %q, want one, %q", tc.set, got, tc.want)
		}
	}
}

// A sidecar is an istio-proxy container, or an istio-proxy init container
// that keeps running (a native sidecar); an init container of that name
// that runs to completion is not one.
func TestHasSidecar(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range []struct {
		name string
		spec corev1.PodSpec
		want bool
	}{
		{"app only", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}, false},
		{"container", corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}, {Name: ProxyContainerName}}}, true},
		{"native", corev1.PodSpec{InitContainers: []corev1.Container{{Name: ProxyContainerName, RestartPolicy: &always}}}, true},
		{"init that completes", corev1.PodSpec{InitContainers: []corev1.Container{{Name: ProxyContainerName}}}, false},
	} {
		if got := HasSidecar(&corev1.Pod{Spec: c.spec}); got != c.want {
			t.Errorf("%s: HasSidecar = %v, want %v", c.name, got, c.want)
		}
	}
}
