package cluster

import (
	"path/filepath"
	"strings"
	"testing"
)

// The state directory need not exist yet: the check looks at the
// filesystem of its nearest existing ancestor, and says how much is free
// and how much is needed.
func TestCheckDiskLooksAtTheNearestExistingAncestor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	if line := checkDisk(dir, 0); line != "" {
		t.Fatalf("nothing needed, yet: %s", line)
	}
	line := checkDisk(dir, 1<<62)
	if !strings.Contains(line, "free on the filesystem of "+filepath.Dir(filepath.Dir(dir))) || !strings.Contains(line, "--state-dir") {
		t.Fatalf("want the free space of the temporary directory and what to do, got %q", line)
	}
}
