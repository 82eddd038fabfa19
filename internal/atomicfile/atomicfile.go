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
func Write(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	return write(path, dir, data, perm, true)
}

// WriteStaged replaces path with data for a reader that watches path's
// directory, not for crash safety: the temporary file is written in
// staging, a directory on the same file system outside the watched tree,
// and renamed into place unsynced. A watcher then sees only the rename
// (one event naming the file), never a temporary that vanishes while it
// walks the directory (istiod's file mode gives up a re-read on one), and
// thousands of files are written without a disk sync each.
func WriteStaged(path, staging string, data []byte, perm os.FileMode) error {
	return write(path, staging, data, perm, false)
}

func write(path, tmpDir string, data []byte, perm os.FileMode, durable bool) (err error) {
	name := filepath.Base(path)
	f, err := os.CreateTemp(tmpDir, TempPrefix(name))
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
	if durable {
		if err = f.Sync(); err != nil {
			return err
		}
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if !durable {
		return nil
	}
	return syncDir(filepath.Dir(path))
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
