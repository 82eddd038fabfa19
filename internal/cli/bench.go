package cli

import "io"

// Bench runs `meshperf bench`: meshperf's parts measured side by side with
// the programs the field holds them against, on this machine.
func Bench(args []string, stdout, stderr io.Writer) int {
	g := commandGroup{
		name: "meshperf bench",
		about: "Side-by-side benchmarks: each measures a part of meshperf and its peer in interleaved rounds on this machine,\n" +
			"and prints medians and the ratios ours/peer against the performance goals (docs/bench.md).",
		subs: []subcommand{
			{name: "proxy", about: "no proxy, meshperf-proxy and HAProxy: one hop and mTLS, HTTP/1.1 and HTTP/2, at 1000 qps and the maximum rate",
				run: func(args []string) int { return untilSignalled(benchProxy, args, stdout, stderr) }},
			{name: "pilot", about: "a file change to the CDS of N proxies: meshperf pilot against istiod, by stage",
				run: func(args []string) int { return untilSignalled(benchPilot, args, stdout, stderr) }},
			{name: "load", about: "the load generator against Fortio and wrk: CPU per request at fixed rates, the maximum rate",
				run: func(args []string) int { return untilSignalled(benchLoad, args, stdout, stderr) }},
		},
	}
	return g.run(args, stdout, stderr)
}
