// Command meshperf measures, tunes and tracks the performance of a service mesh.
// main only picks the subcommand; each lives in internal/cli.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/version"
)

type subcommand struct {
	run   func(args []string, stdout, stderr io.Writer) int
	about string
}

var subcommands = map[string]subcommand{
	"load":   {cli.Load, "generate load against a target (Fortio-compatible flags and JSON)"},
	"server": {cli.Server, "run the echo server (HTTP/1.1 and h2c, TCP echo, gRPC health and ping)"},
	"pilot":  {cli.Pilot, "run the control plane (Istio config in, Envoy xDS out)"},
	"apply":  {cli.Apply, "apply Istio/Kubernetes YAML to the running control plane"},
	"delete": {cli.Delete, "delete the objects a YAML file names from the control plane"},
	"get":    {cli.Get, "list or show objects in the control plane's store"},
	"lab":    {cli.Lab, "run a scenario: pods with and without sidecars, load, and what the mesh costs"},
	"cpload": {cli.Cpload, "load-test a control plane with simulated sidecars; the book's tuning lab"},
}

func main() {
	if len(os.Args) < 2 {
		usage(os.Stderr)
		os.Exit(2)
	}
	switch name := os.Args[1]; name {
	case "help", "-h", "-help", "--help":
		usage(os.Stdout)
	case "version", "-version", "--version":
		fmt.Println("meshperf", version.String())
	default:
		sub, ok := subcommands[name]
		if !ok {
			fmt.Fprintf(os.Stderr, "meshperf: unknown command %q (meshperf help lists them)\n", name)
			os.Exit(2)
		}
		os.Exit(sub.run(os.Args[2:], os.Stdout, os.Stderr))
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: meshperf COMMAND [flags]\n\ncommands:")
	for _, name := range []string{"lab", "load", "server", "pilot", "apply", "delete", "get", "cpload"} {
		fmt.Fprintf(w, "  %-8s %s\n", name, subcommands[name].about)
	}
	fmt.Fprintln(w, "  version  print the version\n\nmeshperf COMMAND -h shows a command's flags.")
}
