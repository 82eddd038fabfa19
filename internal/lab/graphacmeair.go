package lab

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/meshperf/meshperf/internal/acmeair"
	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/results"
)

// The Acmeair app in the lab: a graph whose pods run `meshperf acmeair
// serve` (auth, customer, flight, booking, main; each its own SQLite under
// its pod's data directory, kept from one mode to the next) and whose load
// is `meshperf acmeair drive`, BluePerf's mix, in the client pod: the
// scenario's connections are its users. The services share one JWT key,
// which the lab writes.

// writeJWTKey writes the key every Acmeair service signs and checks tokens
// with: random, this invocation's own.
func (l *lab) writeJWTKey() error {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("lab: JWT key: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(l.cfg.OutDir, "jwt.key"))
	if err == nil {
		err = os.WriteFile(path, []byte(hex.EncodeToString(b[:])+"\n"), 0o600)
	}
	if err != nil {
		return fmt.Errorf("lab: JWT key: %w", err)
	}
	l.graph.jwtKeyFile = path
	return nil
}

// acmeairServeArgs are `meshperf acmeair serve`'s arguments for gp's
// service, before the port, hosts file and ready file every app gets.
func (l *lab) acmeairServeArgs(gp *graphPod) ([]string, error) {
	dir, err := filepath.Abs(filepath.Join(l.cfg.OutDir, "data", gp.pod.Name()))
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return nil, fmt.Errorf("lab: %s: data directory: %w", gp.pod.Name(), err)
	}
	return []string{"acmeair", "serve", "-service", gp.svc.Name, "-data-dir", dir, "-jwt-key-file", l.graph.jwtKeyFile}, nil
}

// acmeairDriveCommand is the driver's command for a run: the scenario's
// connections as users, its duration, the services by name through the
// hosts file (cluster IPs, which the mode's proxies or kube-proxy's rules
// take), its result in Fortio's JSON at jsonPath.
func (l *lab) acmeairDriveCommand(spec scenario.RunSpec, jsonPath string) []string {
	return []string{"acmeair", "drive", "-users", strconv.Itoa(spec.Connections), "-duration", spec.Duration.String(),
		"-hosts", l.graph.hostsFile, "-json", jsonPath}
}

// readTransactions reads the driver's per-transaction figures from its
// result.
func readTransactions(jsonPath string) ([]results.TransactionFigures, error) {
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, fmt.Errorf("the driver's result: %w", err)
	}
	return acmeair.ReadTransactions(b)
}
