package cli

import (
	"context"
	"io"
)

// Bench is `meshperf bench`: the side-by-side benchmarks, meshperf beside
// the peer its issue measures it against.
func Bench(args []string, stdout, stderr io.Writer) int {
	return untilSignalled(func(ctx context.Context, args []string, stdout, stderr io.Writer) int {
		bench := commandGroup{
			name:  "meshperf bench",
			about: "Side-by-side benchmarks: meshperf beside its peers, interleaved, medians and ratios.",
			subs: []subcommand{
				{name: "pilot", about: "a file change to the CDS of N proxies: meshperf pilot against istiod, by stage",
					run: func(args []string) int { return benchPilot(ctx, args, stdout, stderr) }},
			},
		}
		return bench.run(args, stdout, stderr)
	}, args, stdout, stderr)
}
