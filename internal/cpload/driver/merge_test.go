package driver_test

import (
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/cpload/driver"
)

// shardReport is a report of shard index/count of a fixed run, with
// change changes.
func shardReport(index, count int) *driver.Report {
	return &driver.Report{Shape: "uniform", Proxies: 4, Shard: &driver.ShardFigures{
		Shard: driver.Shard{Index: index, Count: count},
		Run: driver.RunIdentity{Shape: "uniform", Fleet: "f00d", FleetProxies: 4 * count, Target: "127.0.0.1:15010",
			Scoping: driver.ScopeNamespace, Churn: driver.ChurnConfig, Namespace: "ns-0", Rate: 1, Duration: "20s"},
		Changes: []driver.ShardChange{{Label: "churn-0.ns-0.cpload.example", Expected: 4}},
	}}
}

// Merge refuses, in one line naming what differs, reports that are not
// all the shards of one run.
func TestMergeRefusesWhatIsNotOneRun(t *testing.T) {
	otherShape := shardReport(2, 2)
	otherShape.Shard.Run.Shape = "large"
	otherFleet := shardReport(2, 2)
	otherFleet.Shard.Run.Fleet = "beef"
	otherTarget := shardReport(2, 2)
	otherTarget.Shard.Run.Target = "127.0.0.1:15011"
	otherChanges := shardReport(2, 2)
	otherChanges.Shard.Changes[0].Label = "churn-9.ns-0.cpload.example"
	for _, tc := range []struct {
		name    string
		reports []*driver.Report
		want    string
	}{
		{"different shape", []*driver.Report{shardReport(1, 2), otherShape}, `a.json and b.json are not one run's shards: -shape "uniform" against "large"`},
		{"different fleet", []*driver.Report{shardReport(1, 2), otherFleet}, `the fleet (shape flags, -proxies) "f00d" against "beef"`},
		{"different target", []*driver.Report{shardReport(1, 2), otherTarget}, `--target "127.0.0.1:15010" against "127.0.0.1:15011"`},
		{"different changes", []*driver.Report{shardReport(1, 2), otherChanges}, "change 1 is churn-0.ns-0.cpload.example in a.json and churn-9.ns-0.cpload.example in b.json"},
		{"duplicate shard", []*driver.Report{shardReport(1, 2), shardReport(1, 2)}, "a.json and b.json are both shard 1/2"},
		{"missing shard", []*driver.Report{shardReport(1, 3), shardReport(3, 3)}, "shard 2/3 is missing: give all 3 shards' reports"},
		{"other count", []*driver.Report{shardReport(1, 2), shardReport(2, 3)}, "a.json is shard 1/2 and b.json shard 2/3"},
		{"not a shard", []*driver.Report{shardReport(1, 2), {Shape: "uniform"}}, `b.json is not the report of a cpload run with -shard I/N`},
	} {
		var in []driver.ShardReport
		for i, r := range tc.reports {
			in = append(in, driver.ShardReport{Source: string(rune('a'+i)) + ".json", Report: r})
		}
		_, err := driver.Merge(in)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v; want one line containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := driver.Merge([]driver.ShardReport{{Source: "b.json", Report: shardReport(2, 2)}, {Source: "a.json", Report: shardReport(1, 2)}}); err != nil {
		t.Errorf("one run's two shards: %v", err)
	}
}
