package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/meshperf/meshperf/internal/results"
)

// Store runs `meshperf store`: moving runs between results stores (a
// machine's SQLite file, a team's PostgreSQL database) and saying what a
// store holds.
func Store(args []string, stdout, stderr io.Writer) int {
	g := commandGroup{
		name: "meshperf store",
		about: "Results stores: a SQLite file (a path or sqlite:PATH, the default) or a PostgreSQL database\n" +
			"(postgres://user:password@host:port/database), which -db takes everywhere.",
		subs: []subcommand{
			{name: "copy", about: "copy every run from one store to another, skipping those already there",
				run: func(args []string) int { return storeCopy(args, stdout, stderr) }},
			{name: "info", about: "print a store's database, schema version and how many runs it holds",
				run: func(args []string) int { return storeInfo(args, stdout, stderr) }},
		},
	}
	return g.run(args, stdout, stderr)
}

func storeCopy(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf store copy", "--from DB --to DB",
		"Copies every run (lab, load, import: with processes, percentiles and provenance) and every control-plane run\n"+
			"from one results store to another, in one transaction on the destination: all of it or none. A run the\n"+
			"destination holds (same run id, label and start time) is skipped, so copying again adds only what is new.\n"+
			"A SQLite destination is created if missing; the source must exist.")
	var from, to string
	cmd.flags.StringVar(&from, "from", "", "the `DB` to copy from: a path, sqlite:PATH or postgres:// URL")
	cmd.flags.StringVar(&to, "to", "", "the `DB` to copy to: a path, sqlite:PATH or postgres:// URL")
	if err := cmd.parseFlagsOnly(args, stdout); err != nil {
		return cmd.exit(stderr, err)
	}
	switch {
	case from == "" || to == "":
		return cmd.exit(stderr, usagef("--from and --to are both needed"))
	case from == to:
		return cmd.exit(stderr, usagef("--from and --to name the same store"))
	}
	// Both are checked before either is opened, so that a bad --from does
	// not leave an empty --to file behind.
	if err := checkStoreLocation(to); err != nil {
		return cmd.exit(stderr, err)
	}
	if err := checkStoreExists(from); err != nil {
		return cmd.exit(stderr, err)
	}
	src, err := openExistingStore(from)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer src.Close()
	dst, err := openStore(to)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer dst.Close()
	n, err := results.Copy(dst, src)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	_, err = fmt.Fprintf(stdout, "copied %d runs (%d already there), %d sweeps (%d already there) and %d control-plane runs (%d already there) from %s to %s\n",
		n.Runs, n.RunsSkipped, n.Sweeps, n.SweepsSkipped, n.ControlPlaneRuns, n.ControlPlaneRunsSkipped, src, dst)
	return cmd.exit(stderr, err)
}

func storeInfo(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf store info", "[DB]",
		"Prints what a results store is (database, dialect, schema version) and how many runs it holds.\n"+
			"DB is a path, sqlite:PATH or postgres:// URL; the default is "+defaultResultsDB+".")
	rest, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	db := defaultResultsDB
	switch len(rest) {
	case 0:
	case 1:
		db = rest[0]
	default:
		return cmd.exit(stderr, usagef("one DB at most, got %d arguments", len(rest)))
	}
	st, err := openExistingStore(db)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer st.Close()
	v, err := st.Version()
	if err != nil {
		return cmd.exit(stderr, fmt.Errorf("read the schema version of %s: %w", st, err))
	}
	n, err := st.Count()
	if err != nil {
		return cmd.exit(stderr, err)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "database\t%s\n", st)
	fmt.Fprintf(tw, "dialect\t%s\n", st.Dialect())
	fmt.Fprintf(tw, "schema version\t%d\n", v)
	fmt.Fprintf(tw, "runs\t%d (%d invocations)\n", n.Runs, n.Invocations)
	fmt.Fprintf(tw, "control-plane runs\t%d\n", n.ControlPlaneRuns)
	return cmd.exit(stderr, tw.Flush())
}
