package model

// Workload is one workload of the registry as a push sees it: a
// WorkloadEntry, a Kubernetes Pod, or a sidecar that registered itself from
// its node metadata.
type Workload struct {
	Name           string
	Namespace      string
	Address        string // an IP; empty when the entry names none
	Labels         map[string]string
	ServiceAccount string
	// FromEntry says a WorkloadEntry declares it, FromPod a Kubernetes Pod;
	// neither means a connected sidecar registered it.
	FromEntry bool
	FromPod   bool
	// Node is the Kubernetes node a pod runs on ("" for the others: a
	// WorkloadEntry names its node by label).
	Node string
	// WorkloadName is what telemetry names a pod's workload (its
	// Deployment); "" for the others, named by Name.
	WorkloadName string
	// NotReady is a pod whose Ready condition is false: node proxies send
	// it no service traffic.
	NotReady bool
	// Sidecar is a pod with its own proxy, which node proxies do not
	// capture.
	Sidecar bool
	// Services are the services that select it, in the registry's service
	// order, each with the workload port behind each service port.
	Services []WorkloadService
}

// WorkloadService is one service selecting a workload.
type WorkloadService struct {
	Service *Service
	Ports   []PortMapping
}

// PortMapping is a service port and the workload port it reaches.
type PortMapping struct {
	ServicePort uint32
	TargetPort  uint32
}
