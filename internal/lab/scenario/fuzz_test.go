package scenario

import (
	"io/fs"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse: it must never panic, must give a
// one-line error or a scenario that validates and expands.
func FuzzParse(f *testing.F) {
	entries, _ := fs.ReadDir(shippedFS, "shipped")
	for _, e := range entries {
		data, _ := shippedFS.ReadFile("shipped/" + e.Name())
		f.Add(data)
	}
	f.Add([]byte("connections: [4]\nqps: 1000\nduration: 1e300\n"))
	f.Add([]byte("connections: [4]\nqps: [1000]\nmodes: both-sidecars\nwarmup: -9223372036s\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Errorf("Parse accepted what Validate rejects: %v", err)
		}
		if n := len(s.Expand()); n != s.Repetitions*len(s.Modes)*len(s.Connections)*len(s.QPS) {
			t.Errorf("Expand gave %d runs", n)
		}
	})
}
