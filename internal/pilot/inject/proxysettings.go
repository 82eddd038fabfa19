package inject

import (
	"strconv"

	"istio.io/api/annotation"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"
)

// The sidecar's defaults, Istio's: two worker threads, and requests of
// 100m CPU and 128Mi memory with no limits.
const (
	defaultConcurrency   = 2
	defaultProxyCPU      = "100m"
	defaultProxyMemory   = "128Mi"
	maxProxyConcurrency  = 256 // meshperf-proxy's bound on ISTIO_META_CONCURRENCY
	proxyConfigConcurKey = "concurrency"
)

// proxySettings are what a pod's annotations ask of its sidecar, read as
// Istio's injector reads them: the worker threads from
// proxy.istio.io/config's concurrency, and the container's resources from
// sidecar.istio.io/proxyCPU, proxyMemory, proxyCPULimit and
// proxyMemoryLimit. The lab's modes set them per Deployment, as Istio's
// benchmark does.
type proxySettings struct {
	concurrency int
	resources   corev1.ResourceRequirements
}

// proxySettingsOf reads annotations; an annotation it cannot honour is an
// error wrapping ErrCannotInject (the pod is then admitted without a
// sidecar, and the reason is in the warning and the pilot's log).
func proxySettingsOf(annotations map[string]string) (proxySettings, error) {
	s := proxySettings{concurrency: defaultConcurrency, resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(defaultProxyCPU),
			corev1.ResourceMemory: resource.MustParse(defaultProxyMemory),
		},
	}}
	if raw, ok := annotations[annotation.ProxyConfig.Name]; ok {
		// ProxyConfig as YAML; of its fields only concurrency changes what
		// injection writes, the rest is the control plane's business.
		var cfg map[string]any
		if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
			return s, cannot("annotation %s: %v", annotation.ProxyConfig.Name, err)
		}
		if v, ok := cfg[proxyConfigConcurKey]; ok {
			n, isNumber := v.(float64)
			switch {
			case !isNumber || n != float64(int(n)):
				return s, cannot("annotation %s: concurrency %v: want a whole number", annotation.ProxyConfig.Name, v)
			case n < 1 || n > maxProxyConcurrency:
				// Istio reads 0 as "every CPU of the node", which the
				// injector cannot know.
				return s, cannot("annotation %s: concurrency %v: want 1 to %d worker threads", annotation.ProxyConfig.Name, v, maxProxyConcurrency)
			}
			s.concurrency = int(n)
		}
	}
	for _, r := range []struct {
		name string
		list *corev1.ResourceList
		kind corev1.ResourceName
	}{
		{annotation.SidecarProxyCPU.Name, &s.resources.Requests, corev1.ResourceCPU},
		{annotation.SidecarProxyMemory.Name, &s.resources.Requests, corev1.ResourceMemory},
		{annotation.SidecarProxyCPULimit.Name, &s.resources.Limits, corev1.ResourceCPU},
		{annotation.SidecarProxyMemoryLimit.Name, &s.resources.Limits, corev1.ResourceMemory},
	} {
		raw, ok := annotations[r.name]
		if !ok {
			continue
		}
		q, err := resource.ParseQuantity(raw)
		if err != nil || q.Sign() <= 0 {
			return s, cannot("annotation %s: %q is not a positive quantity (e.g. 500m, 256Mi)", r.name, raw)
		}
		if *r.list == nil {
			*r.list = corev1.ResourceList{}
		}
		(*r.list)[r.kind] = q
	}
	// A limit below the request would make the API server refuse the pod:
	// the request comes down to the limit.
	for kind, limit := range s.resources.Limits {
		if req, ok := s.resources.Requests[kind]; ok && limit.Cmp(req) < 0 {
			s.resources.Requests[kind] = limit
		}
	}
	return s, nil
}

func (s proxySettings) concurrencyEnv() string { return strconv.Itoa(s.concurrency) }
