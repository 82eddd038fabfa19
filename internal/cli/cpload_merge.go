package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/meshperf/meshperf/internal/cpload/driver"
)

// cploadMerge is `meshperf cpload merge A.json B.json ...`: one report of
// the shards of a fleet split over several cpload processes.
func cploadMerge(args []string, stdout, stderr io.Writer) int {
	cmd := newCommand("meshperf cpload merge", "[flags] SHARD.json...",
		"Merges the --json reports of a fleet's shards (cpload run -shard 1/N .. N/N against one control plane) into one report of the whole fleet, printed as cpload run prints its own.")
	var jsonOut, db string
	cmd.flags.StringVar(&jsonOut, "json", "", "write the merged report as JSON to `FILE`")
	cmd.flags.StringVar(&db, "db", "", "store the merged run in this results database (`PATH` or postgres:// URL)")
	files, err := cmd.parse(args, stdout)
	if err != nil {
		return cmd.exit(stderr, err)
	}
	if len(files) == 0 {
		return cmd.exit(stderr, usagef("no reports: give every shard's --json report (meshperf cpload merge shard1.json shard2.json ...)"))
	}
	if err := checkStoreLocation(db); err != nil {
		return cmd.exit(stderr, err)
	}
	shards := make([]driver.ShardReport, 0, len(files))
	for _, path := range files {
		r, err := readCploadReport(path)
		if err != nil {
			return cmd.exit(stderr, err)
		}
		shards = append(shards, driver.ShardReport{Source: path, Report: r})
	}
	r, err := driver.Merge(shards)
	if err != nil {
		return cmd.exit(stderr, inputError{err})
	}
	r.Print(stdout)
	return cmd.exit(stderr, saveCpload(jsonOut, db, r, []*driver.Report{r}))
}

// readCploadReport reads one cpload run --json report; a file that is not
// one is bad input.
func readCploadReport(path string) (*driver.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, inputError{err}
	}
	var r driver.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, inputError{fmt.Errorf("%s is not a cpload run --json report: %w", path, err)}
	}
	return &r, nil
}
