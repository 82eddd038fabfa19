package driver

import (
	"context"

	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// apiApplier changes config through meshperf pilot's HTTP API (what
// meshperf apply and delete call), with its one client: each Apply or
// Delete is one atomic write.
type apiApplier struct{ c *api.Client }

// Apply creates or updates rs.
func (a apiApplier) Apply(ctx context.Context, rs []*config.Resource) error {
	_, err := a.c.ApplyResources(ctx, rs)
	return err
}

// Delete deletes rs.
func (a apiApplier) Delete(ctx context.Context, rs []*config.Resource) error {
	keys := make([]config.Key, len(rs))
	for i, r := range rs {
		keys[i] = r.Key()
	}
	_, err := a.c.DeleteKeys(ctx, keys)
	return err
}

// ConfigDumpBytes is the size of a proxy's /debug/config_dump (Envoy's
// admin JSON, as the book measures with du -sh), 0 if it cannot be had.
func (a apiApplier) ConfigDumpBytes(ctx context.Context, proxyID string) int64 {
	dump, err := a.c.ConfigDump(ctx, proxyID)
	if err != nil {
		return 0
	}
	return int64(len(dump))
}
