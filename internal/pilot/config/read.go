package config

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ReadPaths decodes every path in order: a file, a directory (its *.yaml,
// *.yml and *.json files, sorted by name, not recursing), or "-" for stdin.
// Errors name the file; nothing is returned with an error.
func ReadPaths(paths []string, stdin io.Reader) ([]*Resource, error) {
	var out []*Resource
	for _, p := range paths {
		files, err := ExpandPath(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rs, err := readOne(f, stdin)
			if err != nil {
				return nil, err
			}
			out = append(out, rs...)
		}
	}
	return out, nil
}

// ExpandPath lists the files a path stands for: itself, "-" (standard input),
// or a directory's *.yaml, *.yml and *.json files in name order, not
// recursing. ReadPaths reads what it lists; other readers of config files (a
// delete that needs only identities) use it to follow the same rule.
func ExpandPath(p string) ([]string, error) {
	if p == "-" {
		return []string{p}, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, err // *PathError already names the file
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			files = append(files, filepath.Join(p, e.Name()))
		}
	}
	sort.Strings(files)
	return files, nil
}

func readOne(name string, stdin io.Reader) ([]*Resource, error) {
	var data []byte
	var err error
	if name == "-" {
		if stdin == nil {
			return nil, fmt.Errorf("-: no standard input")
		}
		name = "<stdin>"
		data, err = io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	} else if data, err = os.ReadFile(name); err != nil {
		return nil, err
	}
	return Decode(name, data)
}
