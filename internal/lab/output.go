package lab

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/meshperf/meshperf/internal/results"
)

// WriteOutputs writes the invocation's CSV and HTML report into the output
// directory and prints the summary.
func WriteOutputs(rep *Report, out io.Writer) error {
	runs := rep.Runs()
	s := results.Summarize(runs)
	s.Sweep = rep.Sweep
	rep.CSV = filepath.Join(rep.OutDir, rep.RunID+".csv")
	if err := writeFile(rep.CSV, func(w io.Writer) error { return results.WriteCSV(w, runs) }); err != nil {
		return err
	}
	rep.HTML = filepath.Join(rep.OutDir, "report.html")
	if err := writeFile(rep.HTML, func(w io.Writer) error { return results.WriteHTML(w, runs, s) }); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if err := results.WriteSummary(out, s); err != nil {
		return fmt.Errorf("lab: summary: %w", err)
	}
	if err := results.WritePromVsProc(out, runs); err != nil {
		return fmt.Errorf("lab: summary: %w", err)
	}
	if rep.Cluster != "" {
		fmt.Fprintf(out, "cluster: %s\n", rep.Cluster)
	}
	for _, np := range rep.NodeProxies {
		fmt.Fprintf(out, "node proxy: %s\n", np)
	}
	if rep.Sweep != nil {
		fmt.Fprintln(out)
		if err := rep.Sweep.Analysis.WriteText(out); err != nil {
			return fmt.Errorf("lab: sweep analysis: %w", err)
		}
	}
	fmt.Fprintf(out, "\nresults: %s, %s", rep.CSV, rep.HTML)
	if rep.DB != "" {
		fmt.Fprintf(out, ", %s", rep.DB)
	}
	fmt.Fprintf(out, " (run id %s, %s)\n", rep.RunID, rep.Wall.Round(1e9))
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	bw := bufio.NewWriter(f)
	if err := write(bw); err != nil {
		f.Close()
		return fmt.Errorf("lab: %s: %w", path, err)
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("lab: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("lab: %s: %w", path, err)
	}
	return nil
}
