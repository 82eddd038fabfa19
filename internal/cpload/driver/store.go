package driver

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/meshperf/meshperf/internal/results"
)

// StoreRow is the report as a row of the results store's cp_runs. It fails
// rather than store a row without its report (a figure that is not a number
// cannot be written as JSON).
func (r *Report) StoreRow() (results.ControlPlaneRun, error) {
	js, err := json.Marshal(r)
	if err != nil {
		return results.ControlPlaneRun{}, fmt.Errorf("report %q cannot be stored: %w", orDefault(r.Name, "cpload run"), err)
	}
	row := results.ControlPlaneRun{Label: orDefault(r.Name, "cpload run"), Shape: r.Shape, Target: r.Target, Sidecar: string(r.Scoping),
		Start: r.Started, External: r.External, Delta: r.Delta, Proxies: r.Proxies, Services: r.Services, ReportJSON: string(js),
		AllSyncedMs: num(r.Connect.AllSynced), ConfigBytesMean: num(r.ConfigSize.SidecarMean), Provenance: r.Provenance}
	row.Churn = "none"
	if c := r.Churn; c != nil {
		row.Churn, row.Changes, row.Missed = c.Kind, c.Changes, c.Missed
		if c.EndToEnd.N > 0 {
			row.E2EP50, row.E2EP90, row.E2EP99, row.E2EMax = num(c.EndToEnd.P50), num(c.EndToEnd.P90), num(c.EndToEnd.P99), num(c.EndToEnd.Max)
		}
	}
	if cp := r.ControlPlane; cp != nil {
		row.Pushes = num(cp.Pushes)
		if cp.Convergence.N > 0 {
			row.ConvergenceP50, row.ConvergenceP90, row.ConvergenceP99 = num(cp.Convergence.P50), num(cp.Convergence.P90), num(cp.Convergence.P99)
		}
	}
	if p := r.Process; p != nil {
		row.CPUSeconds = num(p.CPUSeconds)
		if p.RSSMaxMB > 0 {
			row.RSSMaxMB = num(p.RSSMaxMB)
		}
	}
	return row, nil
}

func num(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// finite is v, or 0 when it is not a number JSON can carry (a quantile of
// no observations); the N beside it says there were none.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}
