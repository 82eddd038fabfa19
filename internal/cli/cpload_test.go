package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestCploadBadInput: wrong flags and combinations are one line and exit 2,
// before anything is started.
func TestCploadBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"walk"}, `unknown command "walk" (meshperf cpload help lists them)`},
		{[]string{"run", "--shape", "torus"}, `--shape "torus"`},
		{[]string{"run", "--sidecar", "some"}, `--sidecar "some"`},
		{[]string{"run", "--delta", "--sotw"}, "exclude each other"},
		{[]string{"run", "--churn", "config", "--rate", "0"}, "--rate and --duration must be positive"},
		{[]string{"run", "--target", "127.0.0.1:1"}, "--churn needs a way to change config"},
		{[]string{"run", "--target", "127.0.0.1:1", "--churn", "none", "--apply-with", "kubectl"}, `--apply-with "kubectl"`},
		{[]string{"lab", "extra"}, `unexpected argument "extra"`},
	} {
		var stdout, stderr bytes.Buffer
		code := runCpload(context.Background(), tc.args, &stdout, &stderr, []string{"/nonexistent"})
		if code != exitBadInput || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line containing %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}
