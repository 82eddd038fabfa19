package dashboard

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// maxResultFileBytes bounds a result file the dashboard reads: Fortio's
// results are tens of KB (meshperf load's, with every histogram, under
// 20 KB); a larger file is listed with an error, not read into memory on
// every visit.
const maxResultFileBytes = 16 << 20

// errTooLarge marks a file over maxResultFileBytes.
var errTooLarge = fmt.Errorf("over the %d bytes the dashboard reads of a result file", maxResultFileBytes)

// errNotRegular marks a name of the data directory that is not a regular
// file (a link, a FIFO, a device, a directory): never a result.
var errNotRegular = errors.New("not a regular file: only regular files in the data directory are results")

// dataDirRead is a file of the data directory as read: what it held, and
// its descriptor's stat (nil when it could not be opened).
type dataDirRead struct {
	data []byte
	info fs.FileInfo
}

// readDataDirFile reads name, a bare name in the data directory, through
// one descriptor: opened without following a link (O_NOFOLLOW) and
// without waiting for a FIFO's writer (O_NONBLOCK), then checked on the
// descriptor (a regular file, within maxResultFileBytes), then read. A
// check of the path followed by a read of the path let a file swapped
// for a link (to a file outside the directory) or a FIFO in between be
// served, or hang the request.
func (s *server) readDataDirFile(name string) (dataDirRead, error) {
	f, err := os.OpenFile(filepath.Join(s.dataDir, name), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return dataDirRead{}, fmt.Errorf("a symbolic link, %w", errNotRegular)
	} else if err != nil {
		return dataDirRead{}, err // an *fs.PathError: "open PATH: why"
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return dataDirRead{}, err
	}
	read := dataDirRead{info: info}
	switch {
	case !info.Mode().IsRegular():
		return read, fmt.Errorf("a %s, %w", fileKind(info.Mode()), errNotRegular)
	case info.Size() > maxResultFileBytes:
		return read, fmt.Errorf("%d bytes, %w", info.Size(), errTooLarge)
	}
	// The file may grow after the stat: the bound holds on what is read.
	data, err := io.ReadAll(io.LimitReader(f, maxResultFileBytes+1))
	switch {
	case err != nil:
		return read, err
	case len(data) > maxResultFileBytes:
		return read, fmt.Errorf("grew while read, %w", errTooLarge)
	}
	read.data = data
	return read, nil
}

// fileKind names what a file that is not regular is, for its error.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "FIFO"
	case m.IsDir():
		return "directory"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
