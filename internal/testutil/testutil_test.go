package testutil

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPollReturnsOnceTrue(t *testing.T) {
	calls := 0
	err := Poll(10*time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Errorf("Poll: %v after %d calls, want nil after 3", err, calls)
	}
}

func TestPollGivesTheLastReason(t *testing.T) {
	err := Poll(20*time.Millisecond, func() error { return errors.New("queue has 2 items") })
	if err == nil || !strings.Contains(err.Error(), "queue has 2 items") || !strings.Contains(err.Error(), "after 20ms") {
		t.Errorf("Poll: %v, want the condition's last error and the timeout", err)
	}
}

func TestFirstDifference(t *testing.T) {
	if got := firstDifference("a\nb\nc", "a\nB\nc"); !strings.Contains(got, "line 2") || !strings.Contains(got, `"B"`) {
		t.Errorf("firstDifference: %s", got)
	}
	if got := firstDifference("a\n", "a"); !strings.Contains(got, "line 2") {
		t.Errorf("a missing last line: %s", got)
	}
}
