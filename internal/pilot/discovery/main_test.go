package discovery_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// stream, push or timer goroutine left running is a leak in production too.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
