package shape

import (
	"strings"
	"testing"

	networking "istio.io/api/networking/v1alpha3"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

// The ServiceEntry form has a ServiceEntry for each Service, with the host,
// ports and selector istiod would derive, and a WorkloadEntry for each pod,
// while the proxies and the rest of the mesh stay as they were.
func TestServiceEntryForm(t *testing.T) {
	m, err := BookLab(BookLabOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	se, err := InForm(m, FormServiceEntries, "cluster.local")
	if err != nil {
		t.Fatal(err)
	}
	if se.Count(config.KindService) != 0 || se.Count(config.KindServiceEntry) != m.Count(config.KindService)+m.Count(config.KindServiceEntry) ||
		se.Count(config.KindWorkloadEntry) != m.Count(config.KindWorkloadEntry)+len(m.Proxies) || len(se.Proxies) != len(m.Proxies) ||
		len(se.All())-se.Count(config.KindServiceEntry)-se.Count(config.KindWorkloadEntry) !=
			len(m.All())-m.Count(config.KindService)-m.Count(config.KindServiceEntry)-m.Count(config.KindWorkloadEntry) {
		t.Fatalf("kinds: %d Services became %d ServiceEntries, %d pods %d WorkloadEntries", m.Count(config.KindService),
			se.Count(config.KindServiceEntry), len(m.Proxies), se.Count(config.KindWorkloadEntry))
	}
	var catalog *networking.ServiceEntry
	for _, r := range se.Resources {
		if r.Kind == config.KindServiceEntry && r.Meta.Name == "catalog" && r.Meta.Namespace == BookNamespace {
			catalog = r.Spec.(*networking.ServiceEntry)
		}
	}
	if catalog == nil || catalog.GetHosts()[0] != "catalog.istioinaction.svc.cluster.local" ||
		catalog.GetResolution() != networking.ServiceEntry_STATIC || catalog.GetWorkloadSelector().GetLabels()["app"] != "catalog" ||
		catalog.GetPorts()[0].GetProtocol() != "HTTP" {
		t.Errorf("catalog's entry: %v", catalog)
	}
	if got, err := InForm(m, FormServices, "cluster.local"); err != nil || got != m {
		t.Errorf("services form: %v, %v", got, err)
	}
	if _, err := InForm(m, "crds", "cluster.local"); err == nil || !strings.Contains(err.Error(), `form "crds": want services or serviceentries`) {
		t.Errorf("unknown form: %v", err)
	}
}
