package results

// Roles of the processes of a run over a service graph (a topology or the
// Acmeair app), where every pod runs an app and, in the sidecar modes, a
// sidecar; Process.Pod says which pod. The node proxies and the waypoint
// keep their two-pod roles; the control plane is measured in every graph
// run, as the whole mesh's cost includes it.
const (
	RoleGraphApp      = "app"           // a service of the graph, in Process.Pod
	RoleGraphSidecar  = "sidecar"       // a sidecar, in Process.Pod
	RoleControlPlane  = "control-plane" // meshperf pilot
	RoleLoadGenerator = "load-generator"
)

// GraphRun is what a run over a service graph adds to its record: the
// load went to the graph's entrypoint, and Run's latency is end to end.
type GraphRun struct {
	// Workload is what ran: a topology's name ("tree-13") or "acmeair".
	Workload string `json:"workload"`
	// Entrypoint is the service the load was sent to.
	Entrypoint string `json:"entrypoint"`
	// Pods is how many pods the graph ran in (one per replica), the load
	// generator's left out.
	Pods int `json:"pods"`
	// Hops is how many pod-to-pod hops the longest path from the load
	// generator through the graph crosses (the load generator's hop to the
	// entrypoint counted): what added latency is divided by per hop.
	Hops int `json:"hops"`
	// SetupSeconds is how long the mode took to stand up: pods enrolled,
	// proxies started and configured, apps ready.
	SetupSeconds float64 `json:"setup_seconds"`
	// Services are each service's own figures over the run, from the
	// histograms the services export (isotope's metric names).
	Services []ServiceFigures `json:"services"`
	// Transactions are the Acmeair driver's figures per transaction; nil
	// for a topology.
	Transactions []TransactionFigures `json:"transactions,omitempty"`
}

// ServiceFigures are one service's figures over a run, summed over its
// replicas.
type ServiceFigures struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
	Requests int64  `json:"requests"`
	Errors   int64  `json:"errors"` // answers other than 2xx
	// Latency is the time the service took to answer, its calls included,
	// ms, read from its duration histogram's buckets (so as coarse as
	// they are); NaN when it served nothing.
	Latency Latency `json:"latency"`
}

// TransactionFigures are one transaction's figures over a run of the
// Acmeair driver (Login, QueryFlight, BookFlight...).
type TransactionFigures struct {
	Name   string  `json:"name"`
	Count  int64   `json:"count"`
	Errors int64   `json:"errors"`
	RPS    float64 `json:"rps"`
	// Latency is from every call's time, ms.
	Latency Latency `json:"latency"`
}
