package results

import (
	"path/filepath"
	"testing"

	"github.com/meshperf/meshperf/internal/testutil"
)

// A two-pod report is the same page it was before graph runs had a part
// of their own: the golden file was written by the code before that part.
func TestTwoPodReportUnchanged(t *testing.T) {
	runs := quickRuns()
	parts, err := RenderReport(runs, Summarize(runs))
	if err != nil {
		t.Fatal(err)
	}
	testutil.Golden(t, filepath.Join("testdata", "two-pod-report.html"), []byte(string(parts.Header)+"\n"+string(parts.Body)))
}
