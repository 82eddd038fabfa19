package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/meshperf/meshperf/internal/topology"
)

// Topology runs `meshperf topology validate|list|show`: service graphs in
// isotope's format, checked before the lab stands them up. Exit status: 0
// done (a valid file); 2 a bad file or argument.
func Topology(args []string, stdout, stderr io.Writer) int {
	group := commandGroup{
		name:  "meshperf topology",
		about: "Service graphs in isotope's format: check a file, list the shipped ones, print one to copy and edit.",
		subs: []subcommand{
			{name: "validate", about: "check a topology file (or a shipped one) and summarise it: services, pods, entrypoints, hops",
				run: func(args []string) int { return topologyValidate(args, stdout, stderr) }},
			{name: "list", about: "list the shipped topologies and what each models",
				run: func(args []string) int { return topologyList(args, stdout, stderr) }},
			{name: "show", about: "print a shipped topology's YAML",
				run: func(args []string) int { return topologyShow(args, stdout, stderr) }},
		},
	}
	return group.run(args, stdout, stderr)
}

// parseOneArg is parse for a command that takes exactly one positional
// argument; what names it in the usage error.
func (c *command) parseOneArg(args []string, stdout io.Writer, what string) (string, error) {
	rest, err := c.parse(args, stdout)
	switch {
	case err != nil:
		return "", err
	case len(rest) == 0:
		return "", usagef("missing %s", what)
	case len(rest) > 1:
		return "", usagef("one %s at a time, got %q too", what, rest[1])
	}
	return rest[0], nil
}

func topologyValidate(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf topology validate", "FILE|NAME",
		"Reads a topology file (or a shipped topology: "+strings.Join(topology.Shipped(), ", ")+") as isotope does, strictly,\n"+
			"and summarises it; a bad file is one line naming the field, exit status 2.")
	arg, err := cmd.parseOneArg(args, stdout, "topology (a file or a shipped name)")
	if err != nil {
		return cmd.exit(stderr, err)
	}
	top, err := topology.Resolve(arg)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	_, _ = io.WriteString(stdout, topologySummary(top))
	return exitOK
}

// topologySummary is validate's paragraph, then a note per key isotope
// ignores, so that nobody believes numRbacPolicies did something.
func topologySummary(top *topology.Topology) string {
	var entries []string
	for _, e := range top.Entrypoints() {
		hops := top.Hops(e.Name)
		unit := "hops"
		if hops == 1 {
			unit = "hop"
		}
		entries = append(entries, fmt.Sprintf("%s (%d %s)", e.Name, hops, unit))
	}
	noun := "entrypoint"
	if len(entries) > 1 {
		noun = "entrypoints"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "topology %s is valid: %d services in %d pods (one per replica); %s %s.\n",
		top.Name, len(top.Services), top.Pods(), noun, strings.Join(entries, ", "))
	b.WriteString("Hops count the longest chain of calls from a client through the entrypoint, the client's own hop included.\n")
	for _, key := range top.Ignored {
		fmt.Fprintf(&b, "note: %s is ignored (isotope ignores it too)\n", key)
	}
	return b.String()
}

func topologyList(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf topology list", "", "Lists the shipped topologies: what each models, its services, pods and hops.")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	for _, name := range topology.Shipped() {
		top, err := topology.LoadShipped(name)
		if err != nil {
			return cmd.exit(stderr, err)
		}
		about, err := topology.Description(name)
		if err != nil {
			return cmd.exit(stderr, err)
		}
		entry := top.Entrypoints()[0].Name
		fmt.Fprintf(stdout, "%s: %d services, %d pods, %d hops\n  %s\n", name, len(top.Services), top.Pods(), top.Hops(entry), about)
	}
	return exitOK
}

func topologyShow(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf topology show", "NAME",
		"Prints a shipped topology's YAML ("+strings.Join(topology.Shipped(), ", ")+"), to copy and edit.")
	name, err := cmd.parseOneArg(args, stdout, "shipped topology name")
	if err != nil {
		return cmd.exit(stderr, err)
	}
	data, err := topology.ShippedSource(name)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	_, _ = stdout.Write(data)
	return exitOK
}
