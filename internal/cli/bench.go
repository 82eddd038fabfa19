package cli

import "io"

// Bench runs `meshperf bench`: the side-by-side benchmarks of meshperf's
// parts against their peers (internal/bench).
func Bench(args []string, stdout, stderr io.Writer) int {
	group := commandGroup{
		name:  "meshperf bench",
		about: "Side-by-side benchmarks: meshperf's parts against the programs the field measures them by, interleaved, medians and ratios.",
		subs: []subcommand{
			{name: "load", about: "the load generator against Fortio and wrk: CPU per request at fixed rates, the maximum rate", run: func(a []string) int { return BenchLoad(a, stdout, stderr) }},
		},
	}
	return group.run(args, stdout, stderr)
}
