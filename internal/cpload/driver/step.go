package driver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/cpload/sim"
)

// runStep connects the proxies to e, churns, and measures.
func runStep(ctx context.Context, c *Config, e *env) (*Report, error) {
	// The config just applied must be in the control plane's snapshot
	// before the proxies connect, or their first config (whose size is
	// reported) would be of the mesh before it.
	e.waitQuiet(ctx, quietPeriod(c))
	fleet := pick(c.Mesh.Proxies, c.Proxies)
	specs := c.Shard.of(fleet)
	r := newReport(c, e, len(specs))
	// The whole fleet's size: every shard of a run has the parameters hash
	// of the run unsharded.
	prov, err := c.provenance(len(fleet))
	if err != nil {
		return nil, err
	}
	r.Provenance = prov
	f, err := sim.NewFleet(specs, sim.Options{Target: e.xds, Delta: c.Delta, NoSDS: c.NoSDS, ConnectRate: c.ConnectRate, ProxiesPerConn: c.ProxiesPerConn})
	if err != nil {
		return nil, err
	}
	if err := e.checkPilotFiles(len(specs), c.ProxiesPerConn); err != nil {
		return nil, err
	}
	var changes []churn.Change
	var received [][]churn.Arrivals
	if c.Shard.split() && !c.Shard.first() {
		if err := c.awaitShardsReady(ctx, e, specs); err != nil {
			return nil, err
		}
		changes = c.changes(specs)
		received = watchChanges(f, changes)
	}
	c.progress("connecting %d simulated proxies to %s", len(specs), e.xds)
	connecting := e.sample(ctx)
	if err := f.Start(ctx); err != nil {
		return nil, err
	}
	defer f.Stop()
	wctx, cancel := context.WithTimeout(ctx, c.timeout())
	err = f.WaitSynced(wctx)
	cancel()
	if err != nil {
		if e.pilot != nil && e.pilot.Exited() {
			return nil, errors.New(e.pilot.ExitReason())
		}
		return nil, fmt.Errorf("waiting for the proxies' first config: %w%s", err, e.awaitingConfig(ctx))
	}
	synced := e.sample(ctx)
	fr := f.Report()
	r.Connect = ConnectFigures{AllConnected: ms(fr.AllConnected), AllSynced: ms(fr.AllSynced), FirstConfig: pct(fr.FirstConfig)}
	r.ConfigSize = configSize(f, specs)
	if e.api != nil && r.ConfigSize.Workload != "" && e.pilot != nil {
		r.ConfigSize.WorkloadDumpBytes = e.api.ConfigDumpBytes(ctx, r.ConfigSize.workloadID)
	}
	if c.Shard.split() {
		r.Shard = shardFigures(c, f, fleet, specs)
		if c.Shard.first() {
			if err := c.awaitAllShards(ctx, e, len(fleet)); err != nil {
				return nil, err
			}
		}
	}

	quiet := quietPeriod(c)
	e.waitQuiet(ctx, quiet)
	before := e.sample(ctx)
	if e.prom != nil {
		if err := e.prom.WaitScrapedAfter(ctx, metrics.ScrapeJob, before.at); err != nil && e.promServer != nil {
			return nil, err
		}
	}
	if r.Shard != nil && !c.Shard.first() {
		r.Shard.Changes = c.receiveChanges(ctx, f, changes, received)
		r.Notes = append(r.Notes, fmt.Sprintf("shard %s: end-to-end times need shard 1's apply times: meshperf cpload merge the shards' --json reports", c.Shard))
	} else if changes := c.changes(specs); len(changes) > 0 {
		if e.api == nil {
			return nil, fmt.Errorf("--churn %s needs a way to change config", c.Churn)
		}
		c.progress("churn %s: %d changes", c.Churn, len(changes))
		runner := &churn.Runner{Applier: e.api, Proxies: churn.FleetProxies{Fleet: f}, Timeout: c.timeout()}
		var res churn.Result
		if c.Churn == ChurnPerfTest {
			res, err = runner.Sequential(ctx, c.Churn, changes, c.Delay)
		} else {
			res, err = runner.Paced(ctx, c.Churn, changes, c.Rate)
		}
		if err != nil {
			return nil, err
		}
		r.setChurn(res)
		if r.Shard != nil {
			r.Shard.Changes = appliedChanges(res.Changes)
		}
		e.waitQuiet(ctx, quiet)
	}
	after := e.sample(ctx)
	r.setControlPlane(before, after)
	r.setResources(e, before, after)
	if r.Process != nil {
		r.Process.ConnectCPU = e.cpuBetween(connecting, synced)
	}
	if e.prom != nil {
		if err := r.setPrometheus(ctx, e.prom, before.at, after.at); err != nil {
			r.Notes = append(r.Notes, "Prometheus figures unavailable: "+err.Error())
		}
	}
	if e.api != nil {
		if rs := c.cleanup(); len(rs) > 0 {
			_ = e.api.Delete(ctx, rs)
		}
	}
	return r, nil
}

// checkPilotFiles refuses a fleet whose connections the meshperf pilot this
// run started could not accept; the fleet checks its own side in Start.
func (e *env) checkPilotFiles(proxies, perConn int) error {
	if e.pilot == nil {
		return nil
	}
	b, err := sim.ProcessFiles(e.pilot.PID())
	if err != nil {
		return nil // no /proc: the accepts will say if it runs out
	}
	return sim.CheckFiles(b, proxies, max(perConn, 1), "the meshperf pilot this run started", "")
}

// quietPeriod is how long the push counter must stand still for the control
// plane to count as idle: a debounce window and some.
func quietPeriod(c *Config) time.Duration {
	d := 100 * time.Millisecond
	if c.Knobs.DebounceAfter > 0 {
		d = c.Knobs.DebounceAfter
	}
	return d + 400*time.Millisecond
}

// scrape is the control plane's metrics at one instant.
type scrape struct {
	at   time.Time
	snap *metrics.Snapshot
}

// awaitingConfig is the control plane's side of a wait that timed out:
// how many streams it counts as not yet sent their full config
// (pilot_xds_awaiting_config), or "" when it does not say.
func (e *env) awaitingConfig(ctx context.Context) string {
	s := e.sample(ctx)
	if !s.snap.Has("pilot_xds_awaiting_config") {
		return ""
	}
	return fmt.Sprintf("; the control plane counts %.0f of its %.0f streams as not yet sent their full config (pilot_xds_awaiting_config)",
		s.snap.Sum("pilot_xds_awaiting_config"), s.snap.Sum("pilot_xds"))
}

// cpuBetween is the control plane's CPU seconds between two samples: from
// its process when sampled, else from its process_cpu_seconds_total.
func (e *env) cpuBetween(from, to scrape) float64 {
	// The control plane is the sampler's first process when it is sampled
	// at all; the others (cpload itself) are not it.
	if e.sampler != nil && e.controlPlaneSampled {
		if w := e.sampler.Window(from.at, to.at); len(w) > 0 && w[0].Samples > 0 {
			return w[0].CPU.Seconds()
		}
	}
	if from.snap != nil && to.snap != nil && to.snap.Has("process_cpu_seconds_total") {
		return to.snap.Sum("process_cpu_seconds_total") - from.snap.Sum("process_cpu_seconds_total")
	}
	return 0
}

func (e *env) sample(ctx context.Context) scrape {
	s := scrape{at: time.Now()}
	if e.metricsURL != "" {
		s.snap, _ = metrics.Scrape(ctx, nil, e.metricsURL)
	}
	if e.sampler != nil {
		s.at = e.sampler.SampleNow()
	}
	return s
}

// waitQuiet returns once pilot_xds_pushes has not moved for quiet (the
// pushes that connecting proxies cause, as new endpoints, must be over
// before the test counts), or after a minute.
func (e *env) waitQuiet(ctx context.Context, quiet time.Duration) {
	if e.metricsURL == "" {
		return
	}
	deadline := time.Now().Add(time.Minute)
	last := math.NaN()
	for time.Now().Before(deadline) && ctx.Err() == nil {
		s, err := metrics.Scrape(ctx, nil, e.metricsURL)
		if err != nil {
			return
		}
		n := s.Sum("pilot_xds_pushes") + s.Sum("pilot_inbound_updates")
		if n == last {
			return
		}
		last = n
		select {
		case <-ctx.Done():
		case <-time.After(quiet):
		}
	}
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func pct(p sim.Percentiles) Percentiles {
	return Percentiles{N: p.N, P50: ms(p.P50), P90: ms(p.P90), P99: ms(p.P99), Max: ms(p.Max)}
}
