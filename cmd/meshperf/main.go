// Command meshperf measures, tunes and tracks the performance of a service mesh.
// main only hands the command line to internal/cli, where every command lives.
package main

import (
	"os"

	"github.com/meshperf/meshperf/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
