package cluster

import (
	"context"
	"time"
)

// Status is what `meshperf cluster status` reports.
type Status struct {
	Up         bool            `json:"up"` // complete, every process running
	StateDir   string          `json:"state_dir"`
	Kubeconfig string          `json:"kubeconfig,omitempty"`
	NodeReady  bool            `json:"node_ready"`
	Processes  []ProcessStatus `json:"processes"`
	Started    time.Time       `json:"started,omitzero"`
	// Problem says why the cluster is not up, when it is not.
	Problem string `json:"problem,omitempty"`
}

// ProcessStatus is one recorded component.
type ProcessStatus struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Alive bool   `json:"alive"`
}

// GetStatus reads the state directory and asks the API server whether the
// node is Ready. No cluster is a Status with Up false, not an error.
func GetStatus(ctx context.Context, stateDir string) (Status, error) {
	st := Status{StateDir: stateDir, Processes: []ProcessStatus{}}
	s, err := loadState(stateDir)
	if IsNoCluster(err) {
		st.Problem = "no cluster"
		return st, nil
	}
	if err != nil {
		return st, err
	}
	st.Kubeconfig, st.Started = AdminKubeconfig(stateDir), s.Started
	all := true
	for _, r := range s.Processes {
		a := r.Alive()
		all = all && a
		st.Processes = append(st.Processes, ProcessStatus{Name: r.Name, PID: r.PID, Alive: a})
	}
	if alive(s, "kube-apiserver") {
		if c, err := adminClient(stateDir); err == nil {
			ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st.NodeReady = nodeReady(ctx, c) == nil
		}
	}
	switch {
	case !s.Complete:
		st.Problem = "up did not finish (still coming up, or killed): run meshperf cluster down"
	case !all:
		st.Problem = "a component is not running: run meshperf cluster down, then up"
	case !st.NodeReady:
		st.Problem = "the node is not Ready"
	}
	st.Up = st.Problem == ""
	return st, nil
}
