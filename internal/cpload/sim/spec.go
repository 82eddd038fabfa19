package sim

import (
	"fmt"
	"net/netip"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// ProxySpec is one simulated pod's proxy: who it says it is when it connects.
// It lives here, in the lowest cpload layer, because it is exactly what an ADS
// client puts in its node id and metadata; shape produces ProxySpecs for the
// pods of a mesh and imports sim only for this type, and sim knows nothing of
// configuration kinds.
type ProxySpec struct {
	Router         bool              // a gateway (node type "router") rather than a sidecar
	Name           string            // the pod name
	Namespace      string            // the pod's namespace
	IP             string            // the pod IP (INSTANCE_IPS and the node id)
	Labels         map[string]string // the pod's labels; Services select on them
	ServiceAccount string            // the pod's service account (its SPIFFE identity)
	WorkloadName   string            // the Deployment, for WORKLOAD_NAME and OWNER
}

// NodeID is the proxy's Istio node id, TYPE~IP~POD.NS~NS.svc.DOMAIN.
func (s ProxySpec) NodeID(domain string) string {
	typ := "sidecar"
	if s.Router {
		typ = "router"
	}
	return typ + "~" + s.IP + "~" + s.Name + "." + s.Namespace + "~" + s.Namespace + ".svc." + domain
}

// Validate says what is wrong with the spec, in one line.
func (s ProxySpec) Validate() error {
	switch {
	case s.Name == "" || strings.ContainsAny(s.Name, "~."):
		return fmt.Errorf("proxy %q: the pod name must be non-empty and contain no '~' or '.'", s.Name)
	case s.Namespace == "" || strings.ContainsAny(s.Namespace, "~."):
		return fmt.Errorf("proxy %s: the namespace %q must be non-empty and contain no '~' or '.'", s.Name, s.Namespace)
	}
	if _, err := netip.ParseAddr(s.IP); err != nil {
		return fmt.Errorf("proxy %s.%s: IP %q is not an IP address", s.Name, s.Namespace, s.IP)
	}
	return nil
}

// NodeOptions are the parts of a node every proxy of a fleet shares.
type NodeOptions struct {
	DomainSuffix string // "cluster.local" if empty
	// ClusterID is the Kubernetes cluster the pods run in; istiod matches it
	// against its registries' cluster ("Kubernetes" by default, also when it
	// runs with --registries= and a config directory).
	ClusterID string
	// IstioVersion is what istio-agent reports; istiod picks features by it
	// and labels pilot_xds with it.
	IstioVersion string
	// Extra metadata merged over the generated keys (for a control plane that
	// wants more).
	Extra map[string]any
}

// Defaults for NodeOptions.
const (
	DefaultDomainSuffix = "cluster.local"
	DefaultClusterID    = "Kubernetes"
	DefaultIstioVersion = "1.27.0"
)

func (o NodeOptions) withDefaults() NodeOptions {
	if o.DomainSuffix == "" {
		o.DomainSuffix = DefaultDomainSuffix
	}
	if o.ClusterID == "" {
		o.ClusterID = DefaultClusterID
	}
	if o.IstioVersion == "" {
		o.IstioVersion = DefaultIstioVersion
	}
	return o
}

// Node builds the Envoy node a real sidecar sends on its first request: the
// Istio node id, and the metadata istio-agent writes from the pod (the
// ISTIO_META_* keys without the prefix). istiod reads NAMESPACE, LABELS,
// SERVICE_ACCOUNT, INSTANCE_IPS, WORKLOAD_NAME, CLUSTER_ID and ISTIO_VERSION to
// place the proxy; NAME, MESH_ID, INTERCEPTION_MODE and OWNER are sent too
// because istiod's defaults for them assume a Kubernetes pod it can look up.
func (s ProxySpec) Node(o NodeOptions) (*corev3.Node, error) {
	o = o.withDefaults()
	labels := make(map[string]any, len(s.Labels))
	for k, v := range s.Labels {
		labels[k] = v
	}
	workload := s.WorkloadName
	if workload == "" {
		workload = s.Name
	}
	meta := map[string]any{
		"NAME":              s.Name,
		"NAMESPACE":         s.Namespace,
		"LABELS":            labels,
		"SERVICE_ACCOUNT":   s.ServiceAccount,
		"INSTANCE_IPS":      s.IP,
		"WORKLOAD_NAME":     workload,
		"CLUSTER_ID":        o.ClusterID,
		"ISTIO_VERSION":     o.IstioVersion,
		"MESH_ID":           o.DomainSuffix,
		"INTERCEPTION_MODE": "REDIRECT",
		"OWNER":             "kubernetes://apis/apps/v1/namespaces/" + s.Namespace + "/deployments/" + workload,
	}
	for k, v := range o.Extra {
		meta[k] = v
	}
	st, err := structpb.NewStruct(meta)
	if err != nil {
		return nil, fmt.Errorf("proxy %s.%s: node metadata: %w", s.Name, s.Namespace, err)
	}
	return &corev3.Node{
		Id:            s.NodeID(o.DomainSuffix),
		Cluster:       workload + "." + s.Namespace,
		Metadata:      st,
		UserAgentName: "envoy",
	}, nil
}
