package topology

import (
	"bytes"
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

// Shipped returns the shipped topologies' names, sorted.
func Shipped() []string {
	entries, _ := fs.ReadDir(shippedFS, "shipped")
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	sort.Strings(names)
	return names
}

// ShippedSource returns the shipped topology's file as written, comment
// header included, for users to copy and edit.
func ShippedSource(name string) ([]byte, error) {
	data, err := shippedFS.ReadFile("shipped/" + name + ".yaml")
	if err != nil || strings.ContainsAny(name, `/\`) {
		return nil, fmt.Errorf("no shipped topology %q (shipped: %s)", name, strings.Join(Shipped(), ", "))
	}
	return data, nil
}

// Description is the first line of a shipped topology's comment header,
// what it models in a sentence.
func Description(name string) (string, error) {
	data, err := ShippedSource(name)
	if err != nil {
		return "", err
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(line)), "#")), nil
}

// LoadShipped returns the shipped topology of that name.
func LoadShipped(name string) (*Topology, error) {
	data, err := ShippedSource(name)
	if err != nil {
		return nil, err
	}
	return Parse(data, name+".yaml")
}

// Load reads a topology file.
func Load(path string) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("topology file %s does not exist (shipped topologies: %s)", path, strings.Join(Shipped(), ", "))
		}
		return nil, fmt.Errorf("read topology: %w", err)
	}
	return Parse(data, path)
}

// Resolve reads a topology file when arg names one (it exists, or it ends
// in .yaml/.yml or contains a path separator), and otherwise returns the
// shipped topology of that name.
func Resolve(arg string) (*Topology, error) {
	if arg == "" {
		return nil, fmt.Errorf("no topology given (a file, or a shipped one: %s)", strings.Join(Shipped(), ", "))
	}
	_, statErr := os.Stat(arg)
	looksLikePath := strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") ||
		strings.ContainsRune(arg, os.PathSeparator)
	if statErr != nil && !looksLikePath {
		return LoadShipped(arg)
	}
	return Load(arg)
}
