package export

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/lab/pod"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// ImportOptions say what an imported result measured, which its file does
// not record.
type ImportOptions struct {
	Scenario string // default "imported"
	Mode     string // default: read from the result's labels, else "unknown"
	Labels   string // the runs' provenance labels
	// MeshName and MeshVersion name the mesh the result measured (its data
	// plane and control plane); empty for none known.
	MeshName, MeshVersion string
	// Machine is where the result was measured; zero for unknown. An
	// imported file is not claimed for this machine unless the user says so.
	Machine results.Machine
	// CopyDir keeps a copy of each imported file, named by its SHA-256, so
	// that the stored run keeps its Fortio JSON (and export can give it
	// back) after the original moves; it is also how a second import of
	// the same file is recognised.
	CopyDir string
	Force   bool // import a file already imported
}

// Defaults of ImportOptions.
const (
	DefaultScenario = "imported"
	UnknownMode     = "unknown"
)

// ErrAlreadyImported is returned when the same file (same bytes, start
// time and labels) is in the store already.
var ErrAlreadyImported = errors.New("already imported")

// ImportError is an input file that cannot be imported: unreadable, not a
// Fortio result, or already in the store.
type ImportError struct {
	Path string
	Err  error
}

func (e *ImportError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *ImportError) Unwrap() error { return e.Err }

// ImportFile is a result file read for import.
type ImportFile struct {
	Path string
	Run  results.Run // as results.FromFortioJSON reads it
	Data []byte
	Hash string // SHA-256 of Data, hex
}

// ReadImportFiles reads the Fortio (or Nighthawk fortio-format) results at
// paths. A file that cannot be read or is not a result is an *ImportError.
func ReadImportFiles(paths []string) ([]ImportFile, error) {
	var files []ImportFile
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &ImportError{path, fmt.Errorf("cannot read: %w", errors.Unwrap(err))}
		}
		r, err := results.FromFortioJSON(data)
		if err != nil {
			return nil, &ImportError{path, err}
		}
		sum := sha256.Sum256(data)
		files = append(files, ImportFile{Path: path, Run: r, Data: data, Hash: hex.EncodeToString(sum[:])})
	}
	return files, nil
}

// Import stores the files as the runs of one new run id, numbered as
// repetitions of each (mode, rate, connections), and returns them. A file
// imported before (unless Force), in the store or twice in files, is an
// *ImportError, and then nothing is stored. A failure of the store is
// returned as it is.
func Import(store *results.Store, files []ImportFile, opt ImportOptions) ([]results.Run, error) {
	if !opt.Force {
		seen := map[string]string{}
		for _, f := range files {
			if first, ok := seen[f.Hash]; ok {
				return nil, &ImportError{f.Path, fmt.Errorf("%w: the same file as %s", ErrAlreadyImported, first)}
			}
			seen[f.Hash] = f.Path
			prev, err := previousImport(store, f)
			if err != nil {
				return nil, err
			}
			if prev != "" {
				return nil, &ImportError{f.Path, fmt.Errorf("%w as run %s (same bytes, start time and labels); -force imports it again", ErrAlreadyImported, prev)}
			}
		}
	}
	if err := os.MkdirAll(opt.CopyDir, 0o755); err != nil {
		return nil, fmt.Errorf("import: %w", err)
	}
	runID := pod.NewRunID()
	reps := map[[3]string]int{}
	var runs []results.Run
	for _, f := range files {
		r := f.Run
		r.RunID = runID
		r.Scenario = cmp.Or(opt.Scenario, DefaultScenario)
		r.Mode = cmp.Or(NormalizeMode(opt.Mode), modeFromLabels(r.Label), UnknownMode)
		key := [3]string{r.Mode, strconv.Itoa(r.RequestedQPS), strconv.Itoa(r.Connections)}
		reps[key]++
		r.Repetition = reps[key]
		r.FortioJSON = copyPath(opt.CopyDir, f.Hash)
		r.Provenance = importProvenance(r.Provenance, opt)
		if err := atomicfile.Write(r.FortioJSON, f.Data, 0o644); err != nil {
			return runs, fmt.Errorf("import %s: keep a copy: %w", f.Path, err)
		}
		if err := store.Insert(r); err != nil {
			return runs, fmt.Errorf("import %s: %w", f.Path, err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// copyPath is where the copy of an imported file is kept: named by its
// hash, so that the same bytes always land on the same name.
func copyPath(dir, hash string) string { return filepath.Join(dir, hash+".json") }

// previousImport is the run id of an earlier import of the same file, ""
// for none: a run with the same start time and labels whose kept copy is
// this file's (named by its hash).
func previousImport(store *results.Store, f ImportFile) (string, error) {
	r := f.Run
	same, err := store.Runs(results.Filter{From: r.StartTime, To: r.StartTime.Add(time.Nanosecond)})
	if err != nil {
		return "", err
	}
	for _, s := range same {
		if s.Label == r.Label && filepath.Base(s.FortioJSON) == filepath.Base(copyPath("", f.Hash)) {
			return s.RunID, nil
		}
	}
	return "", nil
}

// importProvenance completes what the result recorded (meshperf's own
// provenance, or the tool and version that measured it, "fortio 1.66.5"):
// the mesh is what the user names, the machine what the user gives (none
// by default: a file from elsewhere is not claimed for this machine), and
// the labels the user's.
func importProvenance(recorded results.Provenance, opt ImportOptions) results.Provenance {
	p := recorded
	if opt.MeshName != "" {
		p.DataPlane = results.Component{Name: opt.MeshName, Version: opt.MeshVersion}
		p.ControlPlane = p.DataPlane
	}
	if opt.Labels != "" {
		p.Labels = opt.Labels
	}
	if opt.Machine != (results.Machine{}) {
		p.Machine = opt.Machine
	}
	return p
}

// NormalizeMode turns Istio's label words (baseline, serveronly, clientonly,
// both, ...) into the lab's mode names; other names are kept as given.
func NormalizeMode(name string) string {
	if m, err := scenario.ParseModes("-mode", name); err == nil && len(m) == 1 {
		return string(m[0])
	}
	return name
}

// modeFromLabels finds the mode in a result's labels the way Istio's
// tooling does, by the word that ends a label ("..._c_16_1024_both"), or
// "" when none is a mode.
func modeFromLabels(labels string) string {
	for _, tok := range strings.Fields(strings.NewReplacer(",", " ", ";", " ").Replace(labels)) {
		parts := strings.Split(tok, "_")
		// Two words first: "ambient_ztunnel" before "ztunnel".
		for k := min(2, len(parts)); k >= 1; k-- {
			word := strings.Join(parts[len(parts)-k:], "_")
			if m, err := scenario.ParseModes("-mode", word); err == nil && len(m) == 1 {
				return string(m[0])
			}
		}
	}
	return ""
}
