package driver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// Shard is which part of the fleet this process simulates: shard Index
// (1..Count) of Count. Several cpload processes (or machines) started with
// the same flags and shards 1/N..N/N make one fleet against one control
// plane, when the fleet is larger than one process may connect (its
// open-files limit) or one machine can simulate. The zero value is the
// whole fleet.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// ParseShard reads -shard's I/N.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	index, err1 := strconv.Atoi(i)
	count, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || count < 1 || index < 1 || index > count {
		return Shard{}, fmt.Errorf("-shard %q: want I/N, this process's shard I of N (1 <= I <= N), e.g. 1/2", s)
	}
	return Shard{Index: index, Count: count}, nil
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// split says the fleet is shared out over several processes.
func (s Shard) split() bool { return s.Count > 1 }

// first says this process is the one that loads the mesh and makes the
// changes: shard 1, or the whole fleet.
func (s Shard) first() bool { return s.Index <= 1 }

// of keeps this shard's proxies: every Count-th, from Index-1. Every shard
// computes it from the same flags, so the shards cover the fleet once;
// taking every Count-th spreads each namespace (and so each change's
// audience) over all shards.
func (s Shard) of(specs []sim.ProxySpec) []sim.ProxySpec {
	if !s.split() {
		return specs
	}
	var out []sim.ProxySpec
	for i := s.Index - 1; i < len(specs); i += s.Count {
		out = append(out, specs[i])
	}
	return out
}

// ShardFigures are what `cpload merge` needs of one shard's run, besides
// its report: which shard, which run, and the raw times its percentiles
// came from, since percentiles cannot be merged.
type ShardFigures struct {
	Shard
	Run RunIdentity `json:"run"`
	// FleetStart is when this shard's proxies began connecting; with its
	// report's AllConnected and AllSynced it places the shard's last stream
	// and last first config on the common clock.
	FleetStart time.Time `json:"fleetStart"`
	// FirstConfigMs is, per proxy of the shard, stream open to its first
	// full config.
	FirstConfigMs []float64 `json:"firstConfigMs"`
	// Sidecars is how many proxies the config size means are over.
	Sidecars int `json:"sidecars"`
	// Changes are the churn's changes as this shard saw them.
	Changes []ShardChange `json:"changes,omitempty"`
}

// ShardChange is one change: when shard 1 applied it, and when each of
// this shard's proxies that had to receive it did.
type ShardChange struct {
	Label    string    `json:"label"`
	Applied  time.Time `json:"applied,omitzero"` // shard 1 only
	Expected int       `json:"expected"`
	// Arrivals are the deliveries seen, Unix nanoseconds: shards on several
	// machines need their clocks synchronized (NTP) for end-to-end times.
	Arrivals []int64 `json:"arrivalsUnixNano"`
}

// RunIdentity is what the shards of one run share; merge refuses shards
// that differ in any of it.
type RunIdentity struct {
	Shape string `json:"shape"`
	// Fleet hashes the node ids of the whole fleet (before sharding): the
	// shape's flags, its seed and -proxies.
	Fleet        string  `json:"fleet"`
	FleetProxies int     `json:"fleetProxies"`
	Target       string  `json:"target"`
	Scoping      Scoping `json:"sidecar"`
	Delta        bool    `json:"delta"`
	Churn        string  `json:"churn"`
	Namespace    string  `json:"namespace"`
	Rate         float64 `json:"rate"`
	Duration     string  `json:"duration"`
	Reps         int     `json:"reps"`
	Delay        string  `json:"delay"`
}

// fields are the identity's parts with their flags' names, for a mismatch
// to name the one that differs.
func (id RunIdentity) fields() [][2]string {
	return [][2]string{
		{"-shape", id.Shape}, {"the fleet (shape flags, -proxies)", id.Fleet}, {"the fleet's proxies", strconv.Itoa(id.FleetProxies)},
		{"--target", id.Target}, {"-sidecar", string(id.Scoping)}, {"-delta", strconv.FormatBool(id.Delta)},
		{"-churn", id.Churn}, {"-namespace", id.Namespace}, {"-rate", strconv.FormatFloat(id.Rate, 'g', -1, 64)},
		{"-duration", id.Duration}, {"-reps", strconv.Itoa(id.Reps)}, {"-delay", id.Delay},
	}
}

func (c *Config) runIdentity(fleet []sim.ProxySpec) RunIdentity {
	h := sha256.New()
	for _, p := range fleet {
		fmt.Fprintln(h, p.NodeID(sim.DefaultDomainSuffix))
	}
	id := RunIdentity{Shape: c.Shape, Fleet: hex.EncodeToString(h.Sum(nil))[:16], FleetProxies: len(fleet), Target: c.Target,
		Scoping: c.Scoping, Delta: c.Delta, Churn: orDefault(c.Churn, ChurnNone), Namespace: c.Namespace}
	switch id.Churn {
	case ChurnPerfTest:
		id.Reps, id.Delay = c.Reps, c.Delay.String()
	case ChurnConfig, ChurnEndpoints:
		id.Rate, id.Duration = c.Rate, c.Duration.String()
	}
	return id
}

// validateShard says what is wrong with a sharded run, in one line.
func (c *Config) validateShard() error {
	s := c.Shard
	switch {
	case !s.split():
		return nil
	case c.Target == "":
		return fmt.Errorf("-shard %s: the shards need a shared --target, a control plane started on its own (docs/cpload.md, \"Several processes, one fleet\")", s)
	case c.Kube != nil:
		return fmt.Errorf("-shard %s: not with --kube so far", s)
	case c.Churn == ChurnEndpoints:
		return fmt.Errorf("-shard %s: endpoint changes carry no name the other shards could tell them apart by; use --churn config or perftest", s)
	case s.first() && c.MetricsURL == "":
		return fmt.Errorf("-shard %s: shard 1 needs --metrics-url, to wait until the control plane counts every shard's proxies before it changes anything", s)
	case c.Prometheus || c.PromURL != "":
		return fmt.Errorf("-shard %s: no --prometheus or --prom-url so far (the merged report has the scraped figures of shard 1)", s)
	}
	return nil
}

// shardsReadyHost is the host of the ServiceEntry shard 1 applies after
// the mesh, for the other shards to connect once the mesh is there: their
// proxies' first config must be of the whole mesh, as shard 1's are. It
// stays until the end of the run (one service more in the churn's
// namespace, in every shard's config alike).
func shardsReadyHost(ns string) string { return "cpload-shards-ready." + ns + ".cpload.example" }

func shardsReadyMarker(ns string) *config.Resource {
	return churn.StaticServiceEntry(ns, "cpload-shards-ready", shardsReadyHost(ns))
}

// awaitShardsReady returns once the mesh shard 1 applies has reached a
// probe proxy that imports the churn's namespace: the marker shard 1
// applies after the mesh. The probe is one of this shard's proxies, before
// it connects: a proxy of another shard, connected, would have its node
// id on two streams at once.
func (c *Config) awaitShardsReady(ctx context.Context, e *env, specs []sim.ProxySpec) error {
	sidecars, _ := audience(specs, c.Scoping, c.Exclude)(c.Namespace)
	if len(sidecars) == 0 {
		c.progress("shard %s: none of its proxies imports namespace %s: not waiting for shard 1 to load the mesh", c.Shard, c.Namespace)
		return nil
	}
	probe, err := sim.NewFleet(specs[sidecars[0]:sidecars[0]+1], sim.Options{Target: e.xds, Delta: c.Delta, NoSDS: c.NoSDS, ConnectRate: -1})
	if err != nil {
		return err
	}
	arrived := probe.Watch("outbound|80||" + shardsReadyHost(c.Namespace))
	if err := probe.Start(ctx); err != nil {
		return err
	}
	defer probe.Stop()
	c.progress("shard %s: waiting for shard 1 to load the mesh into %s", c.Shard, e.xds)
	wctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	if err := arrived.Wait(wctx, nil); err != nil {
		return fmt.Errorf("shard %s: shard 1 did not load the mesh into %s within %s (-timeout): start shard 1 with the same flags", c.Shard, e.xds, c.timeout())
	}
	return nil
}

// awaitAllShards returns once the control plane counts the whole fleet's
// streams, every one sent its full config where it says so
// (pilot_xds_awaiting_config): shard 1 changes nothing before the other
// shards' proxies are there to receive it.
func (c *Config) awaitAllShards(ctx context.Context, e *env, fleetProxies int) error {
	c.progress("shard %s: waiting for the control plane to count the fleet's %d proxies", c.Shard, fleetProxies)
	deadline := time.Now().Add(c.timeout())
	streams := 0.0
	for time.Now().Before(deadline) {
		s, err := metrics.Scrape(ctx, nil, e.metricsURL)
		if err != nil {
			return fmt.Errorf("shard %s: scraping --metrics-url: %w", c.Shard, err)
		}
		streams = s.Sum("pilot_xds")
		if streams >= float64(fleetProxies) && s.Sum("pilot_xds_awaiting_config") == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("shard %s: the control plane counts %.0f streams of the fleet's %d proxies after %s (-timeout): start the other shards (-shard 2/%d ...) with the same flags",
		c.Shard, streams, fleetProxies, c.timeout(), c.Shard.Count)
}

// shardChurnWait bounds how long a shard other than 1 waits for the last
// change: shard 1 waits up to -timeout for the fleet, up to a minute for
// the control plane to quiet down, churns, and each change may take up to
// -timeout to arrive.
func (c *Config) shardChurnWait() time.Duration {
	span := c.Duration
	if c.Churn == ChurnPerfTest {
		span = time.Duration(c.Reps) * (c.Delay + c.timeout())
	}
	return 2*c.timeout() + time.Minute + span
}

// watchChanges registers a watch for every name the changes bring, as the
// churn runner does, before the fleet connects: a shard other than 1 cannot
// know when shard 1 makes them. An expectation with nothing to watch gets
// nil, as in the runner.
func watchChanges(f *sim.Fleet, changes []churn.Change) [][]churn.Arrivals {
	proxies := churn.FleetProxies{Fleet: f}
	out := make([][]churn.Arrivals, len(changes))
	for i, ch := range changes {
		out[i] = make([]churn.Arrivals, len(ch.Expect))
		for j, e := range ch.Expect {
			if e.Name != "" && len(e.Proxies) > 0 {
				out[i][j] = proxies.Watch(e.Name)
			}
		}
	}
	return out
}

// receiveChanges is a shard other than 1's side of the churn: it waits
// until the last change has reached every proxy of the shard that must
// have it (or shardChurnWait), and records the arrivals. Paced changes
// whose own name never reached a proxy count as delivered by the first
// later one that did, as the churn runner counts them for shard 1.
func (c *Config) receiveChanges(ctx context.Context, f *sim.Fleet, changes []churn.Change, watches [][]churn.Arrivals) []ShardChange {
	defer func() {
		for _, ws := range watches {
			for _, w := range ws {
				if w != nil {
					churn.FleetProxies{Fleet: f}.Unwatch(w)
				}
			}
		}
	}()
	if len(changes) == 0 {
		return nil
	}
	c.progress("shard %s: waiting for the %d changes shard 1 makes", c.Shard, len(changes))
	wctx, cancel := context.WithTimeout(ctx, c.shardChurnWait())
	last := len(changes) - 1
	for j, e := range changes[last].Expect {
		if w := watches[last][j]; w != nil {
			_ = w.Wait(wctx, e.Proxies)
		}
	}
	cancel()
	out := make([]ShardChange, len(changes))
	expects := make([][]churn.Expect, len(changes))
	for i, ch := range changes {
		out[i] = ShardChange{Label: ch.Label}
		expects[i] = ch.Expect
		for _, e := range ch.Expect {
			out[i].Expected += len(e.Proxies)
		}
	}
	// Shard 1's runner counts paced changes merged into a later push as
	// delivered by it, and sequential ones (perftest) only by their own name.
	paced := c.Churn != ChurnPerfTest
	churn.EachCatchUp(expects, func(i, j int) churn.Arrivals { return watches[i][j] }, func(i, _ int, at time.Time, own bool) {
		if own || paced {
			out[i].Arrivals = append(out[i].Arrivals, at.UnixNano())
		}
	})
	return out
}

// appliedChanges are shard 1's changes in the form the other shards
// record theirs.
func appliedChanges(res []churn.ChangeResult) []ShardChange {
	out := make([]ShardChange, 0, len(res))
	for _, ch := range res {
		sc := ShardChange{Label: ch.Label, Applied: ch.Applied, Expected: ch.Expected}
		for _, d := range ch.Latencies {
			sc.Arrivals = append(sc.Arrivals, ch.Applied.Add(d).UnixNano())
		}
		out = append(out, sc)
	}
	return out
}

// shardFigures are the fleet's raw figures merge needs.
func shardFigures(c *Config, f *sim.Fleet, fleet, specs []sim.ProxySpec) *ShardFigures {
	sf := &ShardFigures{Shard: c.Shard, Run: c.runIdentity(fleet), FleetStart: f.Report().Start}
	for i, p := range specs {
		s := f.Stats(i)
		if !s.Synced.IsZero() {
			sf.FirstConfigMs = append(sf.FirstConfigMs, ms(s.Synced.Sub(s.Connected)))
		}
		if !p.Router {
			sf.Sidecars++
		}
	}
	return sf
}
