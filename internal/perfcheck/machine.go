package perfcheck

import (
	"fmt"

	"github.com/meshperf/meshperf/internal/results"
)

// acrossMachines is the line perfcheck prints when a baseline was measured
// on another machine than this one (results.Machine's Key: CPU model,
// cores, memory in GiB, as the run store compares runs), or "" when the
// keys match.
func acrossMachines(what string, baseline, current results.Machine) string {
	if baseline.SameAs(current) {
		return ""
	}
	return fmt.Sprintf("compared across machines: %s was measured on %s, this machine is %s", what, baseline, current)
}
