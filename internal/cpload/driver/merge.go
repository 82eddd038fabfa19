package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/sim"
)

// ShardSummary is one shard of a merged report: its proxies and what
// simulating them cost its process.
type ShardSummary struct {
	Shard
	Proxies   int               `json:"proxies"`
	Simulator *SimulatorFigures `json:"simulator,omitempty"`
}

// ShardReport is a shard's report and where it came from, for merge's
// messages.
type ShardReport struct {
	Source string
	Report *Report
}

// Merge makes one report of a fleet's shards (cpload run -shard I/N, all N
// of them): the proxies' figures over every proxy, end to end against
// shard 1's apply times; the control plane's figures from shard 1, which
// scraped it; each shard's simulator cost and their sum. It refuses, in
// one line naming what differs, reports that are not the shards of one
// run.
func Merge(shards []ShardReport) (*Report, error) {
	if len(shards) == 0 {
		return nil, errors.New("no reports to merge: give every shard's --json report")
	}
	byIndex := map[int]ShardReport{}
	var first ShardReport
	for _, s := range shards {
		sf := s.Report.Shard
		if sf == nil {
			return nil, fmt.Errorf("%s is not the report of a cpload run with -shard I/N (no \"shard\" in it)", s.Source)
		}
		if first.Report == nil {
			first = s
		}
		ff := first.Report.Shard
		if sf.Count != ff.Count {
			return nil, fmt.Errorf("%s is shard %s and %s shard %s: not one run's shards", first.Source, ff.Shard, s.Source, sf.Shard)
		}
		if err := sameRun(first.Source, ff.Run, s.Source, sf.Run); err != nil {
			return nil, err
		}
		if prev, dup := byIndex[sf.Index]; dup {
			return nil, fmt.Errorf("%s and %s are both shard %s", prev.Source, s.Source, sf.Shard)
		}
		byIndex[sf.Index] = s
	}
	count := first.Report.Shard.Count
	ordered := make([]*Report, 0, count)
	for i := 1; i <= count; i++ {
		s, ok := byIndex[i]
		if !ok {
			return nil, fmt.Errorf("shard %d/%d is missing: give all %d shards' reports", i, count, count)
		}
		ordered = append(ordered, s.Report)
	}
	for i, r := range ordered[1:] {
		if err := sameChanges(byIndex[1].Source, ordered[0].Shard.Changes, byIndex[i+2].Source, r.Shard.Changes); err != nil {
			return nil, err
		}
	}
	return merged(ordered), nil
}

// sameRun names the first part of two shards' run identities that differs.
func sameRun(a string, ida RunIdentity, b string, idb RunIdentity) error {
	fa, fb := ida.fields(), idb.fields()
	for i := range fa {
		if fa[i][1] != fb[i][1] {
			return fmt.Errorf("%s and %s are not one run's shards: %s %q against %q", a, b, fa[i][0], fa[i][1], fb[i][1])
		}
	}
	return nil
}

func sameChanges(a string, ca []ShardChange, b string, cb []ShardChange) error {
	if len(ca) != len(cb) {
		return fmt.Errorf("%s has %d changes and %s %d: not one run's shards", a, len(ca), b, len(cb))
	}
	for i := range ca {
		if ca[i].Label != cb[i].Label {
			return fmt.Errorf("change %d is %s in %s and %s in %s: not one run's shards", i+1, ca[i].Label, a, cb[i].Label, b)
		}
	}
	return nil
}

// merged is shards (shard 1 first) as one report.
func merged(shards []*Report) *Report {
	one := shards[0]
	out := *one
	out.Shard = nil
	out.Notes = append([]string{fmt.Sprintf("merged from %d shards (cpload run -shard I/%d)", len(shards), len(shards))}, one.Notes...)
	out.Proxies = 0
	var firsts []time.Duration
	var start, lastConnected, lastSynced time.Time
	allConnected, allSynced := true, true
	var size ConfigSizeFigures
	size.ByTypeMean = map[string]float64{}
	sidecars := 0
	sim0 := &SimulatorFigures{}
	for _, r := range shards {
		sf := r.Shard
		out.Proxies += r.Proxies
		for _, v := range sf.FirstConfigMs {
			firsts = append(firsts, msDuration(v))
		}
		if start.IsZero() || sf.FleetStart.Before(start) {
			start = sf.FleetStart
		}
		allConnected = allConnected && r.Connect.AllConnected > 0
		allSynced = allSynced && r.Connect.AllSynced > 0
		lastConnected = later(lastConnected, sf.FleetStart.Add(msDuration(r.Connect.AllConnected)))
		lastSynced = later(lastSynced, sf.FleetStart.Add(msDuration(r.Connect.AllSynced)))
		// Means weighted by each shard's sidecars.
		size.SidecarMean += r.ConfigSize.SidecarMean * float64(sf.Sidecars)
		for t, v := range r.ConfigSize.ByTypeMean {
			size.ByTypeMean[t] += v * float64(sf.Sidecars)
		}
		size.SidecarMax = max(size.SidecarMax, r.ConfigSize.SidecarMax)
		sidecars += sf.Sidecars
		out.Shards = append(out.Shards, ShardSummary{Shard: sf.Shard, Proxies: r.Proxies, Simulator: r.Simulator})
		if s := r.Simulator; s != nil {
			sim0.CPUSeconds += s.CPUSeconds
			sim0.RSSMaxMB += s.RSSMaxMB
		}
	}
	if sidecars > 0 {
		size.SidecarMean /= float64(sidecars)
		for t := range size.ByTypeMean {
			size.ByTypeMean[t] /= float64(sidecars)
		}
	}
	// The workload whose config is shown is shard 1's.
	size.Workload, size.WorkloadBytes, size.WorkloadDumpBytes = one.ConfigSize.Workload, one.ConfigSize.WorkloadBytes, one.ConfigSize.WorkloadDumpBytes
	out.ConfigSize = size
	out.Connect = ConnectFigures{FirstConfig: pct(sim.PercentilesOf(firsts))}
	if allConnected {
		out.Connect.AllConnected = ms(lastConnected.Sub(start))
	}
	if allSynced {
		out.Connect.AllSynced = ms(lastSynced.Sub(start))
	}
	// The simulators' RSS summed: what simulating the fleet held at most
	// (each process's maximum, not at one instant).
	sim0.KBPerProxy = perKB(sim0.RSSMaxMB*(1<<20), out.Proxies)
	out.Simulator = sim0
	if one.Churn != nil {
		out.Churn = mergedChurn(one.Churn, shards)
	}
	return &out
}

// mergedChurn is shard 1's churn with the deliveries of every shard timed
// from shard 1's apply times, summed up as the churn runner sums up one
// process's.
func mergedChurn(c1 *ChurnFigures, shards []*Report) *ChurnFigures {
	changes := make([]churn.ChangeResult, len(shards[0].Shard.Changes))
	for i, ch := range shards[0].Shard.Changes {
		c := &changes[i]
		for _, r := range shards {
			sc := r.Shard.Changes[i]
			c.Expected += sc.Expected
			c.Received += len(sc.Arrivals)
			for _, at := range sc.Arrivals {
				d := max(time.Unix(0, at).Sub(ch.Applied), 0)
				c.Latencies = append(c.Latencies, d)
				c.Last = max(c.Last, d)
			}
		}
	}
	res := churn.Summarize(c1.Kind, time.Time{}, time.Time{}, changes)
	out := *c1
	out.Expected, out.Missed = res.Expected, res.Missed
	out.EndToEnd, out.PerChange = pct(res.EndToEnd), pct(res.PerChange)
	return &out
}

func msDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
