package cli

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/meshperf/meshperf/internal/export"
	"github.com/meshperf/meshperf/internal/results"
)

// Import runs `meshperf import [flags] FILE...`: Fortio JSON results (from
// Fortio, or Nighthawk's --output-format fortio) into the results database
// as the runs of one new run id, which it prints for meshperf compare.
func Import(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf import", "[flags] FILE...",
		"Stores Fortio JSON results (Fortio's own, or Nighthawk's --output-format fortio) in the results database\n"+
			"as the runs of one new run id, and prints that id. The files are numbered as repetitions of each mode,\n"+
			"rate and connection count. A file imported before (same bytes, start time and labels) is refused.\n"+
			"A copy of each file is kept in an imported/ directory beside the database.")
	fs := cmd.flags
	var db string
	var opt export.ImportOptions
	var thisMachine bool
	fs.StringVar(&db, "db", defaultResultsDB, "results database: a `PATH` or a postgres:// URL")
	fs.StringVar(&opt.Scenario, "scenario", export.DefaultScenario, "the runs' scenario `name`")
	fs.StringVar(&opt.Mode, "mode", "", "the runs' `mode` (no-mesh, both-sidecars, ...; default: read from the result's labels, else "+export.UnknownMode+")")
	fs.StringVar(&opt.Labels, "labels", "", "the runs' provenance `labels`, which compare and history select by")
	fs.StringVar(&opt.MeshName, "mesh-name", "", "the mesh the results measured (`name`, e.g. istio); default none recorded")
	fs.StringVar(&opt.MeshVersion, "mesh-version", "", "the measured mesh's `version`")
	fs.BoolVar(&thisMachine, "this-machine", false, "record this machine as where the results were measured (default: unknown)")
	fs.BoolVar(&opt.Force, "force", false, "import files imported before again")
	files, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(files) == 0 {
		return cmd.exit(stderr, usagef("a FILE is needed: a Fortio JSON result"))
	}
	if err := checkStoreLocation(db); err != nil {
		return cmd.exit(stderr, err)
	}
	if opt.MeshVersion != "" && opt.MeshName == "" {
		return cmd.exit(stderr, usagef("--mesh-version needs --mesh-name"))
	}
	if thisMachine {
		opt.Machine = results.LocalMachine()
	}
	read, err := export.ReadImportFiles(files)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	opt.CopyDir = importCopyDir(db)
	store, err := openStore(db)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	defer store.Close()
	runs, err := export.Import(store, read, opt)
	var bad *export.ImportError
	if errors.As(err, &bad) {
		err = inputError{err}
	}
	if err != nil {
		return cmd.exit(stderr, err)
	}
	_, _ = fmt.Fprintln(stdout, runs[0].RunID)
	return exitOK
}

// importCopyDir is where import keeps its copies of the files: beside a
// SQLite database, and under the default results directory for a
// PostgreSQL one (the copies are this machine's; the rows are shared).
func importCopyDir(db string) string {
	dir := filepath.Dir(defaultResultsDB)
	if loc, err := results.ParseLocation(db); err == nil && loc.IsFile() {
		dir = filepath.Dir(loc.File)
	}
	return filepath.Join(dir, "imported")
}
