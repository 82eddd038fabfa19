package model

// Workload is one workload of the registry as a push sees it: a
// WorkloadEntry, or a sidecar that registered itself from its node metadata.
type Workload struct {
	Name           string
	Namespace      string
	Address        string // an IP; empty when the entry names none
	Labels         map[string]string
	ServiceAccount string
	// FromEntry says a WorkloadEntry declares it; false means a connected
	// sidecar registered it.
	FromEntry bool
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
