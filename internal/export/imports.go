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

// Import stores the Fortio (or Nighthawk fortio-format) results at paths
// as the runs of one new run id, numbered as repetitions of each (mode,
// rate, connections), and returns them. Every file is read and checked
// first: one that cannot be read, is not a result, or was imported before
// (unless Force) is an *ImportError, and then nothing is stored. A failure
// of the store is returned as it is.
func Import(store *results.Store, paths []string, opt ImportOptions) ([]results.Run, error) {
	type pending struct {
		run      results.Run
		data     []byte
		copyPath string
	}
	var todo []pending
	seen := map[string]string{}
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
		copyPath := filepath.Join(opt.CopyDir, hex.EncodeToString(sum[:])+".json")
		if !opt.Force {
			if first, ok := seen[copyPath]; ok {
				return nil, &ImportError{path, fmt.Errorf("%w: the same file as %s", ErrAlreadyImported, first)}
			}
			prev, err := previousImport(store, r, copyPath)
			if err != nil {
				return nil, err
			}
			if prev != "" {
				return nil, &ImportError{path, fmt.Errorf("%w as run %s (same bytes, start time and labels); -force imports it again", ErrAlreadyImported, prev)}
			}
		}
		seen[copyPath] = path
		todo = append(todo, pending{r, data, copyPath})
	}
	runID := pod.NewRunID()
	reps := map[[3]string]int{}
	var runs []results.Run
	for _, p := range todo {
		r := p.run
		r.RunID = runID
		r.Scenario = cmp.Or(opt.Scenario, DefaultScenario)
		r.Mode = cmp.Or(NormalizeMode(opt.Mode), modeFromLabels(r.Label), UnknownMode)
		key := [3]string{r.Mode, strconv.Itoa(r.RequestedQPS), strconv.Itoa(r.Connections)}
		reps[key]++
		r.Repetition = reps[key]
		r.FortioJSON = p.copyPath
		r.Provenance = importProvenance(r.Provenance, opt)
		if err := os.MkdirAll(opt.CopyDir, 0o755); err != nil {
			return runs, fmt.Errorf("import: %w", err)
		}
		if err := atomicfile.Write(p.copyPath, p.data, 0o644); err != nil {
			return runs, fmt.Errorf("import: keep a copy of the result: %w", err)
		}
		if err := store.Insert(r); err != nil {
			return runs, fmt.Errorf("import: %w", err)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

// previousImport is the run id of an earlier import of the same file, ""
// for none: a run with the same start time and labels whose kept copy is
// this file's (named by its hash).
func previousImport(store *results.Store, r results.Run, copyPath string) (string, error) {
	same, err := store.Runs(results.Filter{From: r.StartTime, To: r.StartTime.Add(time.Nanosecond)})
	if err != nil {
		return "", err
	}
	for _, s := range same {
		if s.Label == r.Label && filepath.Base(s.FortioJSON) == filepath.Base(copyPath) {
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
