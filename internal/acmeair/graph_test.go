package acmeair

import "testing"

// The app's graph is its five services, one pod each, auth standing as the
// entrypoint two hops deep (login asks customer), and a valid topology.
func TestGraph(t *testing.T) {
	g := Graph()
	if g.Name != AppName || g.Pods() != 5 || g.Hops(ServiceAuth) != 2 || g.Entrypoints()[0].Name != ServiceAuth {
		t.Fatalf("graph %+v", g)
	}
	if err := g.Validate(); err != nil {
		t.Errorf("the app's graph does not validate as a topology: %v", err)
	}
}
