package bench

import (
	"context"
	"path/filepath"

	"github.com/meshperf/meshperf/internal/cpload/istiod"
)

// startIstiod runs pilot-discovery in its file mode, as docs/cpload.md
// says (discovery --registries= --configDir DIR), with the debounce
// settings ours gets.
func startIstiod(ctx context.Context, c *PilotConfig, configDir, dataDir string) (*controlPlane, error) {
	i, err := istiod.Start(ctx, istiod.Options{Path: c.Istiod, Dir: dataDir, Env: debounceEnv(c),
		Source: istiod.FileMode(configDir, filepath.Join(dataDir, "mesh.yaml"))})
	if err != nil {
		return nil, err
	}
	return &controlPlane{xds: i.XDS, metricsURL: i.MetricsURL, pid: i.PID(), stop: i.Stop}, nil
}
