package dashboard

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/compare"
	"github.com/meshperf/meshperf/internal/results"
)

// The data directory: Fortio result files (Fortio's own, meshperf load's,
// Nighthawk's fortio output) that the dashboard lists and draws beside
// the store, as `fortio report -data-dir` serves a directory of results.
// It is read on each request, so files added while the dashboard runs
// show at once.

// noDataDir is what the pages and the API say without -data-dir.
const noDataDir = "no data directory: start meshperf dashboard with -data-dir DIR to list and draw the Fortio JSON result files in DIR"

// fortioFileJSON is one file as /api/fortio lists it: the result's
// figures, or Error when it does not read as a result.
type fortioFileJSON struct {
	File         string         `json:"file"`
	Size         int64          `json:"size_bytes"`
	Modified     time.Time      `json:"modified"`
	Error        string         `json:"error,omitempty"`
	Labels       string         `json:"labels,omitempty"`
	Start        *time.Time     `json:"start,omitempty"`
	RequestedQPS int            `json:"requested_qps"` // 0: as fast as possible
	ActualQPS    compare.Number `json:"actual_qps"`
	Connections  int            `json:"connections"`
	Calls        int64          `json:"calls"`
	P50Ms        compare.Number `json:"p50_ms"`
	P90Ms        compare.Number `json:"p90_ms"`
	P99Ms        compare.Number `json:"p99_ms"`
	Tool         string         `json:"tool,omitempty"` // the tool and version that wrote it
}

// fortioEntry is a file of the data directory with what it holds.
type fortioEntry struct {
	fortioFileJSON
	Run results.Run
}

// readDataDir reads every result file of the data directory, by name.
// Only regular files directly in it whose names end .json are results;
// a file that does not read as one is listed with its error.
func (s *server) readDataDir() ([]fortioEntry, error) {
	if s.dataDir == "" {
		return nil, notFound(noDataDir)
	}
	entries, err := os.ReadDir(s.dataDir)
	if err != nil {
		return nil, err
	}
	var out []fortioEntry
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f, err := s.readDataDirFile(e.Name())
		out = append(out, resultEntry(e.Name(), f, err))
	}
	return out, nil
}

// resultEntry is the entry of the file name that read as f (or failed
// to, with err). The run keeps no path: results.RunHistogram would read
// a run with no histogram again by its path, outside readDataDirFile's
// checks.
func resultEntry(name string, f dataDirRead, err error) fortioEntry {
	e := fortioEntry{fortioFileJSON: fortioFileJSON{File: name}}
	if f.info != nil {
		e.Size, e.Modified = f.info.Size(), f.info.ModTime().UTC()
	}
	if err != nil {
		e.Error = err.Error()
		return e
	}
	run, err := results.FromFortioJSON(f.data)
	if err != nil {
		e.Error = err.Error()
		return e
	}
	n := func(v float64) compare.Number { return compare.Number(v) }
	e.Run = run
	e.Labels, e.RequestedQPS, e.ActualQPS, e.Connections, e.Calls = run.Label, run.RequestedQPS, n(run.ActualQPS), run.Connections, run.Calls
	e.P50Ms, e.P90Ms, e.P99Ms, e.Tool = n(run.Latency.P50), n(run.Latency.P90), n(run.Latency.P99), toolOf(run)
	if !run.StartTime.IsZero() {
		start := run.StartTime.UTC()
		e.Start = &start
	}
	return e
}

// toolOf names the tool that wrote a result: another tool's result
// carries its name and version as the build (results.FromFortioJSON),
// meshperf load's its provenance.
func toolOf(r results.Run) string {
	b := r.Provenance.Meshperf
	switch {
	case b.Version == "":
		return ""
	case strings.HasPrefix(b.Version, "fortio"), strings.HasPrefix(b.Version, "nighthawk"):
		return b.Version
	}
	return "meshperf " + b.String()
}

// dataDirFile is the data directory's result file the request names, as
// its name and what it held when read: a regular file directly in the
// directory whose name ends .json; anything else, a path that climbs out,
// a link or a FIFO included, is a 404.
func (s *server) dataDirFile(r *http.Request) (string, dataDirRead, error) {
	if s.dataDir == "" {
		return "", dataDirRead{}, notFound(noDataDir)
	}
	name := r.PathValue("file")
	unknown := notFound("no result file %q in the data directory: GET /api/fortio lists them", name)
	if name != filepath.Base(name) || strings.ContainsAny(name, `/\`) || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
		return "", dataDirRead{}, unknown
	}
	f, err := s.readDataDirFile(name)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotRegular):
		return "", dataDirRead{}, unknown
	case errors.Is(err, errTooLarge):
		return "", dataDirRead{}, notFound("result file %q: %v", name, err)
	case err != nil:
		return "", dataDirRead{}, err
	}
	return name, f, nil
}

func (s *server) fortioFiles(*http.Request) (response, error) {
	entries, err := s.readDataDir()
	if err != nil {
		return response{}, err
	}
	out := make([]fortioFileJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.fortioFileJSON)
	}
	return response{value: out}, nil
}

// fortioFile answers a result file as it is.
func (s *server) fortioFile(r *http.Request) (response, error) {
	_, f, err := s.dataDirFile(r)
	if err != nil {
		return response{}, err
	}
	return response{contentType: jsonType, body: f.data}, nil
}

// fortioDirPage is what /fortio/ shows: the files, or how to name a
// directory.
type fortioDirPage struct {
	Dir     string
	NoDir   string
	Entries []fortioEntry
}

func (s *server) fortioDirPage(*http.Request) (view, error) {
	p := fortioDirPage{Dir: s.dataDir}
	entries, err := s.readDataDir()
	var re requestError
	switch {
	case errors.As(err, &re) && s.dataDir == "":
		p.NoDir = noDataDir
	case err != nil:
		return view{}, err
	}
	p.Entries = entries
	slices.SortStableFunc(p.Entries, func(a, b fortioEntry) int { return strings.Compare(a.File, b.File) })
	return view{title: "Fortio results", section: sectionFortio, data: p}, nil
}

// fortioFilePage is what /fortio/{file} shows: the result's figures and
// its histogram, drawn as a stored run's.
type fortioFilePage struct {
	Entry fortioEntry
	Run   results.Run
	Chart results.RunChart
}

func (s *server) fortioFilePage(r *http.Request) (view, error) {
	name, f, err := s.dataDirFile(r)
	if err != nil {
		return view{}, err
	}
	p := fortioFilePage{Entry: resultEntry(name, f, nil)}
	p.Run = p.Entry.Run
	if p.Entry.Error == "" {
		if p.Chart, err = drawRun(p.Run); err != nil {
			return view{}, err
		}
	}
	return view{title: "Fortio result " + name, section: sectionFortio, data: p}, nil
}
