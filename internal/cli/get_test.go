package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func startPilotWithBookinfo(t *testing.T) *pilotAPI {
	t.Helper()
	p := startPilotAPI(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"bookinfo.yaml": applyBookinfo, "ratings.yaml": applyRatings})
	if code, _, errOut := p.run(t, runApply, "", "-f", dir); code != 0 {
		t.Fatalf("apply: %s", errOut)
	}
	return p
}

func keysOf(t *testing.T, rs []*config.Resource) []string {
	t.Helper()
	var out []string
	for _, r := range rs {
		out = append(out, r.Key().String())
	}
	return out
}

func TestGetTable(t *testing.T) {
	p := startPilotWithBookinfo(t)
	code, out, errOut := p.run(t, runGet, "", "destinationrules")
	if code != 0 || errOut != "" {
		t.Fatalf("get: exit %d, stderr %q", code, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME REVISION AGE" {
		t.Fatalf("table:\n%s", out)
	}
	for i, want := range [][]string{{"bookinfo", "reviews", "1"}, {"default", "ratings", "1"}} {
		f := strings.Fields(lines[i+1])
		if len(f) != 4 || !slices.Equal(f[:3], want) || !strings.HasSuffix(f[3], "s") {
			t.Errorf("row %d = %q, want %v and an age", i+1, lines[i+1], want)
		}
	}
	// Columns line up.
	if strings.Index(lines[0], "NAME ") != strings.Index(lines[1], "reviews") {
		t.Errorf("columns are not aligned:\n%s", out)
	}

	// -n after the kind filters; a cluster-scoped kind has no NAMESPACE column.
	_, out, _ = p.run(t, runGet, "", "DestinationRule", "-n", "bookinfo")
	if strings.Count(out, "\n") != 2 || !strings.Contains(out, "reviews") || strings.Contains(out, "ratings") {
		t.Errorf("get -n bookinfo:\n%s", out)
	}
	_, out, _ = p.run(t, runGet, "", "namespace")
	if f := strings.Fields(out); len(f) != 6 || f[0] != "NAME" || f[3] != "bookinfo" {
		t.Errorf("get namespace:\n%s", out)
	}
	code, out, errOut = p.run(t, runGet, "", "serviceentries", "--namespace", "bookinfo")
	if code != 0 || out != "" || errOut != "No resources found in bookinfo namespace.\n" {
		t.Errorf("empty list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestGetYAMLAndJSON(t *testing.T) {
	p := startPilotWithBookinfo(t)

	code, out, errOut := p.run(t, runGet, "", "destinationrule", "-o", "yaml")
	if code != 0 {
		t.Fatalf("get -o yaml: %s", errOut)
	}
	if strings.Count(out, "\n---\n") != 1 || !strings.HasPrefix(out, "apiVersion: networking.istio.io/v1\n") {
		t.Errorf("get -o yaml:\n%s", out)
	}
	rs, err := config.Decode("out.yaml", []byte(out))
	if err != nil {
		t.Fatalf("get -o yaml does not decode: %v", err)
	}
	if got := keysOf(t, rs); !slices.Equal(got, []string{"DestinationRule/bookinfo/reviews", "DestinationRule/default/ratings"}) {
		t.Errorf("get -o yaml holds %v", got)
	}
	if rs[0].Meta.ResourceVersion != "1" {
		t.Errorf("resourceVersion = %q, want the store revision 1", rs[0].Meta.ResourceVersion)
	}

	// A JSON list is a kind: List that apply reads back.
	_, out, _ = p.run(t, runGet, "", "virtualservices", "--output=json")
	if !strings.Contains(out, `"kind": "List"`) || !strings.Contains(out, "\n    ") {
		t.Errorf("get -o json is not an indented List:\n%s", out)
	}
	rs, err = config.Decode("out.json", []byte(out))
	if err != nil || !slices.Equal(keysOf(t, rs), []string{"VirtualService/bookinfo/reviews"}) {
		t.Errorf("get -o json: %v, %v", keysOf(t, rs), err)
	}
	code, out, _ = p.run(t, runApply, out, "-f", "-")
	if code != 0 || out != "virtualservice.networking.istio.io/reviews unchanged\n" {
		t.Errorf("apply of get -o json: exit %d, %q", code, out)
	}

	// One object by name, flags before the kind.
	_, out, _ = p.run(t, runGet, "", "-o", "json", "-n", "bookinfo", "virtualservice", "reviews")
	rs, err = config.Decode("one.json", []byte(out))
	if err != nil || strings.Contains(out, "List") || !slices.Equal(keysOf(t, rs), []string{"VirtualService/bookinfo/reviews"}) {
		t.Errorf("get one -o json: %v:\n%s", err, out)
	}
	_, out, _ = p.run(t, runGet, "", "destinationrule", "ratings", "-o", "yaml")
	if rs, err = config.Decode("one.yaml", []byte(out)); err != nil || strings.Contains(out, "---") ||
		!slices.Equal(keysOf(t, rs), []string{"DestinationRule/default/ratings"}) {
		t.Errorf("get one in default -o yaml: %v:\n%s", err, out)
	}
	_, out, _ = p.run(t, runGet, "", "PeerAuthentication", "-A", "-o", "name")
	if out != "peerauthentication.security.istio.io/default\n" {
		t.Errorf("get -o name: %q", out)
	}
	// The Gateway API's Gateway beside Istio's: named by its group.
	waypoint := "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {name: waypoint, namespace: bookinfo}\n" +
		"spec:\n  gatewayClassName: istio-waypoint\n  listeners: [{name: mesh, port: 15008, protocol: HBONE}]\n  addresses: [{value: 10.1.0.9}]\n"
	if code, out, _ = p.run(t, runApply, waypoint, "-f", "-"); code != 0 || out != "gateway.gateway.networking.k8s.io/waypoint created\n" {
		t.Errorf("apply of a waypoint Gateway: exit %d, %q", code, out)
	}
	if _, out, _ = p.run(t, runGet, "", "gateways.gateway.networking.k8s.io", "-A", "-o", "name"); out != "gateway.gateway.networking.k8s.io/waypoint\n" {
		t.Errorf("get the Gateway API's Gateways -o name: %q", out)
	}
	if _, out, _ = p.run(t, runGet, "", "gateways", "-A", "-o", "name"); out != "" {
		t.Errorf("get Istio's Gateways listed the waypoint: %q", out)
	}
	// An empty list in JSON is still a List, on stdout.
	code, out, _ = p.run(t, runGet, "", "sidecars", "-o", "json")
	if rs, err := config.Decode("empty.json", []byte(out)); code != 0 || err != nil || len(rs) != 0 || !strings.Contains(out, `"items": []`) {
		t.Errorf("empty -o json: exit %d, %v:\n%s", code, err, out)
	}
}

func TestGetErrors(t *testing.T) {
	p := startPilotWithBookinfo(t)
	before := p.requests.Load()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "KIND is required, one of Namespace, Service"},
		{[]string{"pods"}, `unknown kind "pods"; supported kinds: Namespace`},
		{[]string{"vs", "a", "b"}, `unexpected argument "b"`},
		{[]string{"virtualservice", "-o", "wide"}, `-o "wide": want yaml, json or name`},
		{[]string{"virtualservice", "x", "-A"}, "-A lists every namespace"},
	} {
		code, out, errOut := p.run(t, runGet, "", c.args...)
		if line := oneLine(t, errOut); code != 2 || out != "" || !strings.HasPrefix(line, "meshperf get: ") || !strings.Contains(line, c.want) {
			t.Errorf("get %v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, line, c.want)
		}
	}
	if p.requests.Load() != before {
		t.Error("bad get arguments reached the server")
	}
	code, out, errOut := p.run(t, runGet, "", "virtualservice", "reviews")
	if line := oneLine(t, errOut); code != 1 || out != "" || line != `meshperf get: VirtualService "reviews" not found in namespace "default"` {
		t.Errorf("get missing: exit %d, %q", code, line)
	}
}

func TestHumanAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                   "0s",
		45 * time.Second:               "45s",
		119 * time.Second:              "119s",
		5*time.Minute + 30*time.Second: "5m30s",
		7 * time.Minute:                "7m",
		95 * time.Minute:               "95m",
		3*time.Hour + 20*time.Minute:   "3h20m",
		30 * time.Hour:                 "30h",
		76 * time.Hour:                 "3d4h",
		400 * 24 * time.Hour:           "400d",
		3 * 365 * 24 * time.Hour:       "3y",
	} {
		if got := humanAge(d); got != want {
			t.Errorf("humanAge(%v) = %q, want %q", d, got, want)
		}
	}
}
