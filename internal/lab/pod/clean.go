package pod

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/meshperf/meshperf/internal/proc"
)

// Removed lists what Clean removed.
type Removed struct {
	Processes []int    // killed because they were inside a lab namespace
	Netns     []string // named namespaces deleted
	Links     []string // bridges and veths deleted
	Cgroups   []string // empty CPU-limit cgroups removed (proc.CgroupParent)
}

// Empty reports whether nothing was removed.
func (r Removed) Empty() bool {
	return len(r.Processes) == 0 && len(r.Netns) == 0 && len(r.Links) == 0 && len(r.Cgroups) == 0
}

// Clean removes what lab networks whose names start with prefix left
// behind: it kills the processes inside their namespaces, deletes the
// namespaces, then the links (veths and bridges). prefix must start with
// Prefix; pass Prefix itself to clean up after every run, or a network's
// NamePrefix for one run. Like Close it keeps going past errors.
func Clean(prefix string) (Removed, error) {
	var r Removed
	if !strings.HasPrefix(prefix, Prefix) {
		return r, fmt.Errorf("clean: prefix %q must start with %q, so that only the lab's own objects are removed", prefix, Prefix)
	}
	var errs []error
	entries, err := os.ReadDir(netnsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("clean: list %s: %w", netnsDir, err))
	}
	ids := map[nsID]bool{}
	var names []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		names = append(names, e.Name())
		if id, err := statNS(netnsDir + "/" + e.Name()); err == nil {
			ids[id] = true
		}
	}
	if len(ids) > 0 {
		r.Processes = killProcessesIn(ids)
	}
	for _, name := range names {
		if err := deleteNamedNetns(name); err != nil {
			errs = append(errs, fmt.Errorf("clean: %w", err))
			continue
		}
		r.Netns = append(r.Netns, name)
	}
	links, err := netlink.LinkList()
	if err != nil {
		errs = append(errs, fmt.Errorf("clean: list links: %w", err))
	}
	// Veths first, bridges last, so no bridge is removed under its ports;
	// deleting a host veth also deletes its pod end.
	var bridges []string
	for _, l := range links {
		name := l.Attrs().Name
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		if l.Type() == "bridge" {
			bridges = append(bridges, name)
			continue
		}
		r.Links, errs = deleteCounted(name, r.Links, errs)
	}
	for _, name := range bridges {
		r.Links, errs = deleteCounted(name, r.Links, errs)
	}
	if prefix == Prefix {
		// CPU-limit cgroups are per process, not per run: only a clean
		// of every run removes them (those still in use stay).
		cg, err := proc.CleanCgroups()
		r.Cgroups = cg
		if err != nil {
			errs = append(errs, fmt.Errorf("clean: %w", err))
		}
	}
	return r, errors.Join(errs...)
}

func deleteCounted(name string, done []string, errs []error) ([]string, []error) {
	if err := deleteLink(name); err != nil {
		return done, append(errs, fmt.Errorf("clean: %w", err))
	}
	return append(done, name), errs
}
