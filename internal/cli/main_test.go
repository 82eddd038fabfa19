package cli

import (
	"os"
	"testing"

	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

// TestMain stops the PostgreSQL cluster the store tests share (pgtest).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
