package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
)

// pilotStartTimeout bounds meshperf pilot's start-up: opening its store
// and CA and binding its listeners take well under a second.
const pilotStartTimeout = 30 * time.Second

// startPilot starts meshperf pilot for a test on loopback port 0, its store
// (and its log, pilot.log) in dataDir: command runs it (nil: this
// executable's `pilot`), env adds the knobs' variables, and meshConfig,
// when given, is written beside the store. Off Kubernetes (trustClaims)
// it trusts the identities the simulated proxies claim, which ask SDS for
// their certificates and cannot each hold a token: safe because it listens
// on loopback only. On Kubernetes SDS serves them nothing, as istiod.
func startPilot(ctx context.Context, command []string, dataDir, meshConfig string, env []string, trustClaims bool) (*proc.Pilot, error) {
	command, err := PilotCommand(command)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, fmt.Errorf("pilot's data directory: %w", err)
	}
	o := proc.PilotOptions{Command: command, DataDir: dataDir, LogLevel: "warn", Env: env,
		LogPath: filepath.Join(dataDir, "pilot.log"), Name: "meshperf pilot", InsecureTrustClaimedIdentity: trustClaims}
	if meshConfig != "" {
		o.MeshConfig = filepath.Join(dataDir, "mesh.yaml")
		if err := os.WriteFile(o.MeshConfig, []byte(meshConfig), 0o644); err != nil {
			return nil, fmt.Errorf("writing the mesh config: %w", err)
		}
	}
	return proc.StartPilot(ctx, o, pilotStartTimeout)
}

// PilotCommand is command, or when empty this executable's `pilot`: how
// meshperf pilot is run, to which callers add their flags.
func PilotCommand(command []string) ([]string, error) {
	if len(command) > 0 {
		return append([]string(nil), command...), nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding meshperf to run its pilot: %w", err)
	}
	return []string{exe, "pilot"}, nil
}
