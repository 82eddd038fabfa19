package driver

import (
	"context"
	"fmt"

	"github.com/meshperf/meshperf/internal/cpload/churn"
	"github.com/meshperf/meshperf/internal/cpload/sim"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// loadedMarkerHost is the host of the ServiceEntry awaitDirLoaded writes
// after the mesh, in namespace ns.
func loadedMarkerHost(ns string) string { return "cpload-mesh-loaded." + ns + ".cpload.example" }

// awaitDirLoaded returns once the control plane has read the mesh cpload
// just wrote into the directory it watches. A directory is read on the
// watcher's schedule, not the writer's: istiod re-reads it on a 250 ms
// debounce, so at a thousand services and more its first reads hold part of
// the mesh, and proxies connecting then get the config of that part (whole
// meshes, when the Sidecars are not read yet) and pay for pushes that only
// exist because of the reading order. The run would then measure the file
// watcher. So cpload writes a marker ServiceEntry after the mesh and waits
// until it reaches a probe proxy that imports its namespace: a control plane
// that re-reads the whole directory (istiod) or applies files in the order
// they were written (meshperf pilot) then holds everything written before
// it. The marker is deleted before the fleet connects.
func (c *Config) awaitDirLoaded(ctx context.Context, e *env, dir *DirApplier) error {
	specs := pick(c.Mesh.Proxies, c.Proxies)
	sidecars, _ := audience(specs, c.Scoping, c.Exclude)(c.Namespace)
	if len(sidecars) == 0 {
		c.progress("no proxy imports namespace %s: not waiting for the control plane to read %s", c.Namespace, dir.Dir)
		return nil
	}
	probe, err := sim.NewFleet(specs[sidecars[0]:sidecars[0]+1],
		sim.Options{Target: e.xds, Delta: c.Delta, NoSDS: c.NoSDS, ConnectRate: -1})
	if err != nil {
		return err
	}
	host := loadedMarkerHost(c.Namespace)
	arrived := probe.Watch("outbound|80||" + host)
	if err := probe.Start(ctx); err != nil {
		return err
	}
	defer probe.Stop()
	marker := []*config.Resource{churn.StaticServiceEntry(c.Namespace, "cpload-mesh-loaded", host)}
	c.progress("waiting for the control plane to read the mesh from %s", dir.Dir)
	if err := dir.Apply(ctx, marker); err != nil {
		return fmt.Errorf("loading the mesh: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.timeout())
	err = arrived.Wait(wctx, nil)
	cancel()
	if err != nil {
		why := ""
		if st := probe.Stats(0); st.StreamErrors > 0 {
			why = fmt.Sprintf("; the probe's %d streams failed, the last with: %s", st.StreamErrors, st.LastError)
		}
		return fmt.Errorf("the control plane did not read the mesh from %s within %s (the ServiceEntry cpload wrote after it never reached a proxy of %s%s): is %s the directory it watches (istiod's --configDir)?",
			dir.Dir, c.timeout(), c.Namespace, why, dir.Dir)
	}
	return dir.Delete(ctx, marker)
}
