package results

import "github.com/meshperf/meshperf/internal/capacity"

// Sweep is what a capacity sweep (meshperf lab sweep) stores beside its
// invocation's runs: each step is an ordinary Run (so compare, history and
// the dashboard see it as any other), and the analysis of all of them —
// knees, capacities, fits, the capacity lost to each mode and the sizing
// advice — is kept whole, as it was printed, under the invocation's run id.
type Sweep struct {
	RunID    string
	Scenario string
	Analysis capacity.Analysis
}
