package lab

import (
	"fmt"
	"strings"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/topology"
)

// graphPortName is the Service port's name, as isotope's converter names
// it: the http- prefix tells the control plane the port speaks HTTP.
const graphPortName = "http-web"

// baseYAML is what every graph mode applies: the namespace (enrolled
// in ambient in the ambient mode), one Service per service of the graph
// with its cluster IP, and the namespace's PeerAuthentication, plus a
// DestinationRule with TLS off per service when both sidecars run without
// mTLS.
func (g *graphLab) baseYAML(r scenario.RunSpec) (yaml string, destinationRules bool) {
	var b strings.Builder
	labels := ""
	if r.Mode.NodeProxies() {
		labels = ", labels: {" + ambientLabel + "}"
	}
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s%s}\n", Namespace, labels)
	for _, s := range g.services {
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  clusterIP: %[3]s
  selector: {app: %[2]s}
  ports:
  - {name: %[4]s, port: %[5]d, targetPort: %[5]d, protocol: TCP}
`, Namespace, s.Name, s.vip, graphPortName, topology.ServicePort)
	}
	fmt.Fprintf(&b, `---
apiVersion: security.istio.io/v1
kind: PeerAuthentication
metadata: {name: default, namespace: %s}
spec:
  mtls: {mode: %s}
`, Namespace, PeerAuthMode(r))
	if PeerAuthMode(r) != "DISABLE" {
		return b.String(), false
	}
	b.WriteString("---\n" + g.destinationRulesYAML())
	return b.String(), true
}

// destinationRulesYAML turns TLS off towards every service, as both
// sidecars without mTLS need.
func (g *graphLab) destinationRulesYAML() string {
	var docs []string
	for _, s := range g.services {
		docs = append(docs, tlsDisableRuleYAML(s.Name, s.host()))
	}
	return strings.Join(docs, "---\n")
}

// graphWorkloadEntriesYAML registers every pod (the client's too) when no
// sidecar does: in no-mesh, so that the control plane knows the graph's
// endpoints as on a cluster, and in ambient, where the node label says
// which node's proxy serves each pod.
func (l *lab) graphWorkloadEntriesYAML(ambient bool) string {
	g := l.graph
	nodeOf := map[string]string{}
	if ambient {
		for _, n := range l.nodes {
			for _, m := range n.members {
				nodeOf[m.pod.Name()] = n.name
			}
		}
	}
	docs := []string{workloadEntryYAML(ClientPod, g.client.IP(), ClientSA, "app: client", nodeOf[ClientPod])}
	for _, gp := range g.pods {
		name := gp.pod.Name()
		docs = append(docs, workloadEntryYAML(name, gp.pod.IP(), gp.svc.Name, "app: "+gp.svc.Name, nodeOf[name]))
	}
	return strings.Join(docs, "---\n")
}
