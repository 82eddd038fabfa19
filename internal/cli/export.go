package cli

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/export"
	"github.com/meshperf/meshperf/internal/results"
)

// defaultResultsDB is the results database the lab writes and export, import and
// the tracking commands read.
var defaultResultsDB = filepath.Join("results", "meshperf.db")

// Export runs `meshperf export [flags] SELECTOR...`: the runs the
// selectors pick (run ids, result files, lab output directories, labels)
// as an SMP document, their Fortio JSON or Istio's CSV.
func Export(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf export", "[flags] SELECTOR...",
		"Writes runs in other tools' formats. SELECTOR is a run id, a result file, a lab output directory or a label.\n"+
			"--format smp: one Service Mesh Performance document (a JSON object: performanceTestConfig,\n"+
			"environmentConfigs, serviceMeshConfigs, performanceTestResults); fortio: each run's Fortio JSON (the\n"+
			"stored file, else rebuilt from the store and marked so), one file per run, -o DIR for several;\n"+
			"istio-csv: Istio's benchmark CSV columns, then meshperf's.")
	fs := cmd.flags
	var format, out, db string
	fs.StringVar(&format, "format", export.FormatSMP, "output `format`: "+strings.Join(export.Formats, ", "))
	fs.StringVar(&out, "o", "", "write to `PATH` (a directory for several runs in the fortio format; default stdout)")
	fs.StringVar(&db, "db", defaultResultsDB, "results database (`PATH` or postgres:// URL) to look run ids and labels up in")
	selectors, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if !slices.Contains(export.Formats, format) {
		return cmd.exit(stderr, usagef("--format %q: want %s", format, strings.Join(export.Formats, ", ")))
	}
	if len(selectors) == 0 {
		return cmd.exit(stderr, usagef("a SELECTOR is needed: a run id, a result file, a lab output directory or a label"))
	}
	runs, err := resolveRuns(db, selectors)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	switch format {
	case export.FormatSMP:
		err = writeOutput(out, stdout, func(w io.Writer) error { return export.WriteSMP(w, runs) })
	case export.FormatIstioCSV:
		err = writeOutput(out, stdout, func(w io.Writer) error { return results.WriteCSV(w, runs) })
	case export.FormatFortio:
		err = writeFortio(out, runs, stdout, stderr)
	}
	return cmd.exit(stderr, err)
}

// resolveRuns is every run the selectors pick, in their order. The
// database is opened only if it exists: files and lab directories need
// none, and a mistyped -db must not leave an empty database behind.
func resolveRuns(db string, selectors []string) ([]results.Run, error) {
	store, err := openStoreIfExists(db)
	if err != nil {
		return nil, err
	}
	if store != nil {
		defer store.Close()
	}
	var runs []results.Run
	for _, s := range selectors {
		picked, err := results.Resolve(store, s)
		if err != nil {
			return nil, inputError{err}
		}
		runs = append(runs, picked...)
	}
	return runs, nil
}

// writeOutput writes what write produces to path, replacing it whole, or
// to stdout when path is "".
func writeOutput(path string, stdout io.Writer, write func(io.Writer) error) error {
	if path == "" {
		return write(stdout)
	}
	var buf bytes.Buffer
	if err := write(&buf); err != nil {
		return err
	}
	return atomicfile.Write(path, buf.Bytes(), 0o644)
}

// writeFortio writes each run's Fortio JSON: one run to out (or stdout),
// several into the directory out, one file per run named by its id, whose
// paths it prints. A rebuilt file is said so on stderr.
func writeFortio(out string, runs []results.Run, stdout, stderr io.Writer) error {
	if len(runs) > 1 && out == "" {
		return usagef("the selectors pick %d runs; the fortio format writes one file per run: -o DIR", len(runs))
	}
	if len(runs) > 1 {
		if err := os.MkdirAll(out, 0o755); err != nil {
			return err
		}
	}
	for _, r := range runs {
		data, rebuilt, err := export.FortioJSON(r)
		if err != nil {
			return err
		}
		if rebuilt {
			_, _ = fmt.Fprintf(stderr, "meshperf export: run %s: its Fortio JSON (%s) is not readable; rebuilt from the store\n",
				export.ResultID(r), cmp.Or(r.FortioJSON, "no file recorded"))
		}
		path := out
		if len(runs) > 1 {
			path = filepath.Join(out, export.ResultName(r)+".json")
		}
		if err := writeOutput(path, stdout, func(w io.Writer) error { _, err := w.Write(data); return err }); err != nil {
			return err
		}
		if len(runs) > 1 {
			_, _ = fmt.Fprintln(stdout, path)
		}
	}
	return nil
}
