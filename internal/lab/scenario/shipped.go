package scenario

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
)

//go:embed shipped/*.yaml
var shippedFS embed.FS

// DefaultName is the scenario `meshperf lab run` uses without an argument.
const DefaultName = "quick"

// List returns the shipped scenarios, sorted by name, the default first.
func List() ([]*Scenario, error) {
	entries, err := fs.ReadDir(shippedFS, "shipped")
	if err != nil {
		return nil, fmt.Errorf("read shipped scenarios: %w", err)
	}
	var out []*Scenario
	for _, e := range entries {
		s, err := Get(strings.TrimSuffix(e.Name(), ".yaml"))
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if (out[i].Name == DefaultName) != (out[j].Name == DefaultName) {
			return out[i].Name == DefaultName
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// Names returns the shipped scenarios' names, sorted.
func Names() []string {
	entries, _ := fs.ReadDir(shippedFS, "shipped")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// Get returns a fresh copy of the shipped scenario with that name.
func Get(name string) (*Scenario, error) {
	data, err := shippedFS.ReadFile("shipped/" + name + ".yaml")
	if err != nil {
		return nil, fmt.Errorf("no shipped scenario %q (shipped: %s)", name, strings.Join(Names(), ", "))
	}
	return Parse(name+".yaml", data)
}

// Load reads a scenario file when nameOrPath names one (it exists, or it
// ends in .yaml/.yml or contains a path separator), and otherwise returns the
// shipped scenario of that name. An empty argument is the default scenario.
func Load(nameOrPath string) (*Scenario, error) {
	if nameOrPath == "" {
		return Get(DefaultName)
	}
	_, statErr := os.Stat(nameOrPath)
	looksLikePath := strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml") ||
		strings.ContainsRune(nameOrPath, os.PathSeparator)
	if statErr != nil && !looksLikePath {
		return Get(nameOrPath)
	}
	data, err := os.ReadFile(nameOrPath)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("scenario file %s does not exist (shipped scenarios: %s)", nameOrPath, strings.Join(Names(), ", "))
		}
		return nil, fmt.Errorf("read scenario: %w", err)
	}
	return Parse(nameOrPath, data)
}
