package sim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: a
// simulated proxy's stream or reader left running after Fleet.Stop is a leak.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
