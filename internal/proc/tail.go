package proc

import (
	"io"
	"os"
	"strings"
	"sync"
)

// tailSize is how much of a process's output is kept for error messages:
// enough for a panic's first frames, little enough for a long-running
// process that logs a lot.
const tailSize = 64 << 10

// tailBuffer keeps the last tailSize bytes written to it: a ring buffer, so
// that a chatty process costs a fixed amount of memory.
type tailBuffer struct {
	mu   sync.Mutex
	buf  [tailSize]byte
	next int  // where the next byte goes
	full bool // the buffer has wrapped at least once
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	n := len(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(b) > tailSize {
		b = b[len(b)-tailSize:]
	}
	for len(b) > 0 {
		c := copy(t.buf[t.next:], b)
		b = b[c:]
		t.next += c
		if t.next == tailSize {
			t.next, t.full = 0, true
		}
	}
	return n, nil
}

// String is the kept output, oldest byte first.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.full {
		return string(t.buf[:t.next])
	}
	return string(t.buf[t.next:]) + string(t.buf[:t.next])
}

// fileTail is the last tailSize bytes of a file ("" if it cannot be read).
func fileTail(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > tailSize {
		if _, err := f.Seek(st.Size()-tailSize, io.SeekStart); err != nil {
			return ""
		}
	}
	data, _ := io.ReadAll(f)
	return string(data)
}

// maxLineBytes cuts the line an error message quotes, so that one long log
// line (a config dump) does not swamp the message.
const maxLineBytes = 300

// lastLine is the last non-empty line of s, cut at maxLineBytes.
func lastLine(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if len(s) > maxLineBytes {
		s = s[:maxLineBytes] + "..."
	}
	return s
}
