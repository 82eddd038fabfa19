// Package atomicfile replaces files so that a reader, or the next start
// after a crash, sees either the old file or the complete new one: the CA's
// root, the ready files, the control plane's saved proxy registrations, the
// YAML files cpload writes into a watched directory.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data: a temporary file in the same directory
// (named TempPrefix(base name) + random, so leftovers can be recognised),
// written, synced, renamed into place, and the directory synced so the
// rename survives a crash.
func Write(path string, data []byte, perm os.FileMode) (err error) {
	dir, name := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	f, err := os.CreateTemp(dir, TempPrefix(name))
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

// TempPrefix is how Write names its temporary files for name: a writer
// killed half way leaves one, which its owner may remove at start.
func TempPrefix(name string) string { return "." + name + ".tmp-" }

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
