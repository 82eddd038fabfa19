package proc

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"github.com/meshperf/meshperf/internal/atomicfile"
)

// Ready is what a meshperf server writes to its --ready-file once every one
// of its listeners is bound (and, for pilot, once it serves xDS: its first
// config snapshot is built): its pid and each listener's bound address by
// name (for `meshperf pilot`: "grpc", "http", "monitoring" and, when on,
// "secureGRPC"; for `meshperf server`: "http", "grpc", "tcp"). A parent that
// passed port 0 learns the real ports here.
type Ready struct {
	PID       int               `json:"pid"`
	Listeners map[string]string `json:"listeners"`
}

// WriteReady writes r to path atomically (a temporary file renamed into
// place), so that a reader polling for the file never sees half of it.
func WriteReady(path string, r Ready) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("ready file: %w", err)
	}
	return nil
}

// ReadReady reads a ready file. It returns an error wrapping fs.ErrNotExist
// while the process has not written it yet.
func ReadReady(path string) (Ready, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Ready{}, err
	}
	var r Ready
	if err := json.Unmarshal(data, &r); err != nil {
		return Ready{}, fmt.Errorf("ready file %s: %w", path, err)
	}
	if r.PID <= 0 || len(r.Listeners) == 0 {
		return Ready{}, fmt.Errorf("ready file %s: no pid or no listeners", path)
	}
	return r, nil
}

// Listener returns the named listener's address, or an error naming the
// ones the file has.
func (r Ready) Listener(name string) (string, error) {
	if a, ok := r.Listeners[name]; ok && a != "" {
		return a, nil
	}
	names := make([]string, 0, len(r.Listeners))
	for n := range r.Listeners {
		names = append(names, n)
	}
	sort.Strings(names)
	return "", fmt.Errorf("process %d has no %q listener (it has %v)", r.PID, name, names)
}
