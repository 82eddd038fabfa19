package istiod_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/cpload/istiod"
	"github.com/meshperf/meshperf/internal/testenv"
)

// TestStartSaysWhyIstiodEnded: a program that exits at once instead of
// serving (here `false`, as a pilot-discovery refusing its flags would)
// fails Start with how it ended and where its log is, not a wait until
// StartTimeout.
func TestStartSaysWhyIstiodEnded(t *testing.T) {
	falsePath := testenv.NeedCommand(t, "false", "coreutils")
	dir := t.TempDir()
	_, err := istiod.Start(context.Background(), istiod.Options{Path: falsePath, Dir: dir, Source: istiod.KubeMode("nosuch")})
	if err == nil {
		t.Fatal("Start of a program that exits at once succeeded")
	}
	if !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), filepath.Join(dir, "istiod.log")) {
		t.Errorf("error %q does not say istiod exited and where its log is", err)
	}
}

// TestVersionOfTheUsersIstiod reads the version of the istiod the tests
// are given (MESHPERF_ISTIOD_BIN).
func TestVersionOfTheUsersIstiod(t *testing.T) {
	bin := testenv.NeedIstiod(t)
	v, err := istiod.Version(context.Background(), bin)
	if err != nil {
		t.Fatal(err)
	}
	if v == "" || strings.Contains(v, "version") || strings.ContainsAny(v, "\n ") {
		t.Errorf("version %q: want the bare version pilot-discovery version -s prints", v)
	}
}
