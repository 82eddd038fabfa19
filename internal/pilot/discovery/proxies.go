package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/meshperf/meshperf/internal/atomicfile"
	"github.com/meshperf/meshperf/internal/pilot/registry"
)

// saveProxiesEvery bounds how often the registrations are written while
// proxies come and go: a thousand proxies connecting at once make a few
// writes, not a thousand. A control plane killed within this window forgets
// the last registrations, whose proxies are connected and will reconnect.
const saveProxiesEvery = 100 * time.Millisecond

// restoreProxies registers the proxies saved by the previous run, in their
// grace period. A missing file is a first start.
func (s *Server) restoreProxies() error {
	if s.opts.ProxiesPath == "" {
		return nil
	}
	data, err := os.ReadFile(s.opts.ProxiesPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("saved proxy registrations: %w", err)
	}
	var recs []registry.ProxyRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		// Only this process writes the file, atomically; a broken one is
		// not worth refusing to start over: the proxies reconnect.
		s.log.Warn("saved proxy registrations unreadable; starting without them", "path", s.opts.ProxiesPath, "error", err)
		return nil
	}
	s.reg.Restore(recs)
	if len(recs) > 0 {
		s.log.Info("restored proxy registrations until they reconnect", "proxies", len(recs), "grace", s.reg.GracePeriod())
	}
	return nil
}

// saveProxies writes the registrations whenever they change, at most every
// saveProxiesEvery, until ctx ends.
func (s *Server) saveProxies(ctx context.Context) {
	if s.opts.ProxiesPath == "" {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.reg.ProxiesChanged():
		}
		data, err := json.Marshal(s.reg.ProxyRecords())
		if err == nil {
			err = atomicfile.Write(s.opts.ProxiesPath, data, 0o600)
		}
		if err != nil {
			s.log.Warn("cannot save proxy registrations", "path", s.opts.ProxiesPath, "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(saveProxiesEvery):
		}
	}
}
