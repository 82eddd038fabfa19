package scope

import (
	"strings"
	"testing"

	meshconfig "istio.io/api/mesh/v1alpha1"

	"github.com/meshperf/meshperf/internal/pilot/config"
)

func namespaceRes(name string, labels map[string]string) *config.Resource {
	r := res(config.KindNamespace, "", name, 0, nil)
	r.Meta.Labels = labels
	return r
}

func expr(key, op string, values ...string) *meshconfig.LabelSelectorRequirement {
	return &meshconfig.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestNamespaceFilterSelected(t *testing.T) {
	namespaces := []*config.Resource{
		namespaceRes("prod", map[string]string{"env": "prod", "team": "shop"}),
		namespaceRes("dev", map[string]string{"env": "dev", "team": "shop"}),
		namespaceRes("infra", map[string]string{"istio-discovery": "enabled"}),
		namespaceRes("bare", nil),
		namespaceRes("istio-system", map[string]string{"purpose": "control-plane"}),
	}
	cases := []struct {
		name      string
		selectors []*meshconfig.LabelSelector
		want      string // selected namespaces among prod dev infra bare istio-system missing
	}{
		{"no selectors select all", nil, "prod dev infra bare istio-system missing"},
		{"matchLabels", []*meshconfig.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}, "prod"},
		{"matchLabels ANDed", []*meshconfig.LabelSelector{{MatchLabels: map[string]string{"env": "dev", "team": "shop"}}}, "dev"},
		{"In", []*meshconfig.LabelSelector{{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("env", "In", "prod", "dev")}}}, "prod dev"},
		{"NotIn matches missing labels too", []*meshconfig.LabelSelector{{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("env", "NotIn", "prod")}}}, "dev infra bare istio-system missing"},
		{"Exists", []*meshconfig.LabelSelector{{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("team", "Exists")}}}, "prod dev"},
		{"DoesNotExist", []*meshconfig.LabelSelector{{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("team", "DoesNotExist")}}}, "infra bare istio-system missing"},
		{"labels and expressions ANDed", []*meshconfig.LabelSelector{{
			MatchLabels:      map[string]string{"team": "shop"},
			MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("env", "NotIn", "prod")},
		}}, "dev"},
		{"selectors ORed", []*meshconfig.LabelSelector{
			{MatchLabels: map[string]string{"env": "prod"}},
			{MatchLabels: map[string]string{"istio-discovery": "enabled"}},
		}, "prod infra"},
		{"root namespace is not special", []*meshconfig.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}, "prod"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := NewNamespaceFilter(c.selectors, namespaces)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ns := range []string{"prod", "dev", "infra", "bare", "istio-system", "missing"} {
				if f.Selected(ns) {
					got = append(got, ns)
				}
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("selected %q, want %q", strings.Join(got, " "), c.want)
			}
		})
	}
}

func TestNamespaceFilterRejectsBadSelectors(t *testing.T) {
	for _, bad := range []*meshconfig.LabelSelector{
		{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("env", "Near", "x")}},
		{MatchExpressions: []*meshconfig.LabelSelectorRequirement{expr("env", "In")}},
		{MatchLabels: map[string]string{"bad key!": "x"}},
	} {
		_, err := NewNamespaceFilter([]*meshconfig.LabelSelector{{}, bad}, nil)
		if err == nil || !strings.Contains(err.Error(), "discoverySelectors[1]") || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v, want one line naming discoverySelectors[1]", bad, err)
		}
	}
}

func TestNamespaceFilterFilter(t *testing.T) {
	ns := []*config.Resource{namespaceRes("prod", map[string]string{"env": "prod"}), namespaceRes("dev", nil)}
	f, err := NewNamespaceFilter([]*meshconfig.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}, ns)
	if err != nil {
		t.Fatal(err)
	}
	in := []*config.Resource{
		kubeSvc("prod", "a", ""), kubeSvc("dev", "b", ""), ns[0], ns[1],
		virtualService("dev", "vs", []string{"b"}, nil, nil), destRule("prod", "dr", "a"), nil,
	}
	if got := names(f.Filter(in)); got != "/dev /prod prod/a prod/dr" {
		t.Errorf("Filter kept %q", got)
	}
	if len(in) != 7 || in[1].Meta.Name != "b" {
		t.Errorf("Filter modified its input")
	}
}

func TestNamespaceFilterRelabel(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	f, err := NewNamespaceFilter([]*meshconfig.LabelSelector{{MatchLabels: prod}}, []*config.Resource{namespaceRes("dev", nil)})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name              string
		ns                string
		old, new          map[string]string
		added, removed    bool
		selectedAfterward bool
	}{
		{"labelled into the selection", "dev", nil, prod, true, false, true},
		{"unrelated label change", "dev", prod, map[string]string{"env": "prod", "x": "y"}, false, false, true},
		{"labelled out", "dev", map[string]string{"env": "prod", "x": "y"}, map[string]string{"env": "dev"}, false, true, false},
		{"created selected", "new", nil, prod, true, false, true},
		{"deleted", "new", prod, nil, false, true, false},
		{"created unselected", "other", nil, map[string]string{"env": "dev"}, false, false, false},
	}
	for _, s := range steps {
		added, removed := f.Relabel(s.ns, s.old, s.new)
		if added != s.added || removed != s.removed || f.Selected(s.ns) != s.selectedAfterward {
			t.Errorf("%s: added=%v removed=%v selected=%v", s.name, added, removed, f.Selected(s.ns))
		}
	}

	all, _ := NewNamespaceFilter(nil, nil)
	if a, r := all.Relabel("x", nil, map[string]string{"a": "b"}); a || r || !all.SelectsAll() {
		t.Errorf("with no selectors relabelling changes nothing")
	}
}
