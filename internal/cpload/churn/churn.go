// Package churn changes a control plane's configuration on a schedule and
// times each change end to end: from the moment it was applied to the moment
// every proxy it affects received the push it caused. It has the book's
// performance-test.sh (a Gateway, Service and VirtualService per
// repetition, each waited for before the next), config churn at a rate (one
// ServiceEntry renamed N times per second) and endpoint churn (WorkloadEntries
// coming and going). What applies the changes, what receives them and what
// tells the time are interfaces, so that the schedule is tested with fakes
// and run against simulated sidecars (sim.Fleet) and any control plane.
package churn

import (
	"context"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Applier makes configuration changes on the control plane.
type Applier interface {
	Apply(ctx context.Context, rs []*config.Resource) error
	Delete(ctx context.Context, rs []*config.Resource) error
}

// Clock tells the time and waits; tests give a fake one.
type Clock interface {
	Now() time.Time
	// Sleep waits d, or returns ctx's error.
	Sleep(ctx context.Context, d time.Duration) error
}

// Arrivals is when a watched name first reached each proxy (sim.Watch).
type Arrivals interface {
	Arrival(i int) (time.Time, bool)
	// Wait returns once every proxy in which has the name, or ctx's error.
	Wait(ctx context.Context, which []int) error
}

// Proxies are the receivers of the changes.
type Proxies interface {
	// Watch starts recording the first arrival of name; call it before the
	// change that brings the name.
	Watch(name string) Arrivals
	Unwatch(Arrivals)
	// FirstAfter is when proxy i first received a response of type t at or
	// after at.
	FirstAfter(i int, t sim.Type, at time.Time) (time.Time, bool)
}

// Expect says who must receive a change, and how that is seen: Name's first
// arrival (a resource or virtual host the change creates), or, when Name is
// empty, the first response of Type after the change (for changes to
// resources the proxies already have, such as endpoints).
type Expect struct {
	Name    string
	Type    sim.Type
	Proxies []int
}

// Change is one step of churn.
type Change struct {
	Label  string
	Apply  []*config.Resource
	Delete []*config.Resource
	Expect []Expect
}

// Audience says which proxies a change in namespace ns reaches: the
// sidecars whose scope imports ns, and the ingress gateways (which bind
// Gateways and ignore Sidecars).
type Audience func(ns string) (sidecars, gateways []int)

// ChangeResult is how one change went.
type ChangeResult struct {
	Label   string
	Applied time.Time
	// ApplyTook is how long the control plane's API took to accept it.
	ApplyTook time.Duration
	// Lag is how late the change was applied against its schedule (paced
	// churn falls behind when applies are slower than the rate).
	Lag time.Duration
	// Expected proxy deliveries, and those seen; Latencies are the seen
	// ones' times from Applied, Last the longest (the change's end to end).
	Expected  int
	Received  int
	Latencies []time.Duration
	Last      time.Duration
	// Receivers are the proxies of Latencies, entry for entry: who got the
	// change, for what follows its way there proxy by proxy (bench pilot's
	// stages).
	Receivers []int
}

// Result sums up a churn run.
type Result struct {
	Kind    string
	Start   time.Time
	End     time.Time
	Changes []ChangeResult
	// EndToEnd is over every (change, proxy) delivery; PerChange over
	// changes, each the time until its last proxy had it.
	EndToEnd  sim.Percentiles
	PerChange sim.Percentiles
	Expected  int
	Missed    int // deliveries not seen before the timeout
}

// Summarize sums up changes: deliveries and misses over all of them, the end
// to end percentiles over every delivery, and the per-change ones over the
// changes every expected proxy received.
func Summarize(kind string, start, end time.Time, changes []ChangeResult) Result {
	r := Result{Kind: kind, Start: start, End: end, Changes: changes}
	var all, last []time.Duration
	for _, c := range changes {
		r.Expected += c.Expected
		r.Missed += c.Expected - c.Received
		all = append(all, c.Latencies...)
		if c.Expected > 0 && c.Received == c.Expected {
			last = append(last, c.Last)
		}
	}
	r.EndToEnd = sim.PercentilesOf(all)
	r.PerChange = sim.PercentilesOf(last)
	return r
}

// RealClock is the system clock.
type RealClock struct{}

// Now is time.Now.
func (RealClock) Now() time.Time { return time.Now() }

// Sleep waits d or until ctx ends.
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FleetProxies adapts a sim.Fleet to Proxies.
type FleetProxies struct{ Fleet *sim.Fleet }

// Watch registers a watch on the fleet.
func (p FleetProxies) Watch(name string) Arrivals { return p.Fleet.Watch(name) }

// Unwatch removes a watch made by Watch.
func (p FleetProxies) Unwatch(a Arrivals) {
	if w, ok := a.(*sim.Watch); ok {
		p.Fleet.Unwatch(w)
	}
}

// FirstAfter reads proxy i's records.
func (p FleetProxies) FirstAfter(i int, t sim.Type, at time.Time) (time.Time, bool) {
	s := p.Fleet.Stats(i)
	return s.FirstAfter(t, at)
}
