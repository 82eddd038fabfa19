//lint:file-ignore SA1019 the dashboards are the classic JSON model (dashboard.Dashboard), which every Grafana imports and provisions; the SDK marks it deprecated in favour of v2, a resource only Grafana 12 with its dynamic dashboards reads

package grafana

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/meshperf/meshperf/internal/cpload/metrics"
	"github.com/meshperf/meshperf/internal/testenv"
)

// panelTypes are the panel plugins the dashboards may use: Grafana's
// built-in ones, so that they load without installing anything.
var panelTypes = map[string]bool{"row": true, "timeseries": true, "stat": true}

// TestDashboardsMatchGrafanaSchema decodes each dashboard strictly with the
// Grafana Foundation SDK, whose types are generated from Grafana's own
// dashboard schema (and its panel plugins' and the Prometheus data
// source's): an unknown field, a wrong type or a missing required field
// anywhere fails. It then checks what a loadable, portable dashboard needs:
// the current schema version, a uid, no instance-specific id, every query
// on the templated Prometheus data source.
func TestDashboardsMatchGrafanaSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	current := dashboard.NewDashboard().SchemaVersion
	if len(Files()) != 2 {
		t.Fatalf("dashboards %v, want the control plane's and the data plane's", Files())
	}
	uids := map[string]bool{}
	for _, name := range Files() {
		t.Run(name, func(t *testing.T) {
			raw, err := Read(name)
			if err != nil {
				t.Fatal(err)
			}
			var strict dashboard.Dashboard
			if err := buildErr(strict.UnmarshalJSONStrict(raw)); err != nil {
				t.Fatalf("not a dashboard by Grafana's schema: %v", err)
			}
			// The SDK's strict decoder checks but, when a nested level had no
			// errors, drops that level's value (it returns an empty error
			// list as an error); its ordinary decoder gives the whole
			// dashboard for the checks below.
			var d dashboard.Dashboard
			if err := json.Unmarshal(raw, &d); err != nil {
				t.Fatal(err)
			}
			checkStrictCatches(t, raw)
			if err := buildErr(d.Validate()); err != nil {
				t.Errorf("schema constraints: %v", err)
			}
			if d.SchemaVersion != current {
				t.Errorf("schemaVersion %d, want the current %d", d.SchemaVersion, current)
			}
			if d.Id != nil {
				t.Errorf("id %d: an id belongs to one Grafana instance; leave it out", *d.Id)
			}
			if d.Uid == nil || !regexp.MustCompile(`^[a-zA-Z0-9_-]{8,40}$`).MatchString(*d.Uid) || uids[*d.Uid] {
				t.Errorf("uid %v: want a unique 8-40 character uid", d.Uid)
			} else {
				uids[*d.Uid] = true
			}
			if d.Title == nil || !strings.HasPrefix(*d.Title, "meshperf") {
				t.Errorf("title %v", d.Title)
			}
			checkDatasourceVariable(t, d)
			checkPanels(t, d)
		})
	}
}

// checkStrictCatches shows that the strict decoding fails on what Grafana
// would not read: a field a timeseries panel's options do not have.
func checkStrictCatches(t *testing.T, raw []byte) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	for _, p := range m["panels"].([]any) {
		if panel := p.(map[string]any); panel["type"] == "timeseries" {
			panel["options"].(map[string]any)["legendz"] = true
			break
		}
	}
	bad, _ := json.Marshal(m)
	var d dashboard.Dashboard
	if err := buildErr(d.UnmarshalJSONStrict(bad)); err == nil || !strings.Contains(err.Error(), "legendz") {
		t.Errorf("strict decoding took an unknown panel option: %v", err)
	}
}

// checkDatasourceVariable checks that the dashboard picks its Prometheus
// through a data source variable, so that it loads into any Grafana.
func checkDatasourceVariable(t *testing.T, d dashboard.Dashboard) {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Name == "datasource" {
			if v.Type != dashboard.VariableTypeDatasource || v.Query == nil || v.Query.String == nil || *v.Query.String != "prometheus" {
				t.Errorf("variable datasource: type %s, query %+v; want a Prometheus data source variable", v.Type, v.Query)
			}
			return
		}
	}
	t.Error("no datasource variable")
}

func checkPanels(t *testing.T, d dashboard.Dashboard) {
	t.Helper()
	ids := map[uint32]bool{}
	queries := 0
	for _, pr := range d.Panels {
		var ps []dashboard.Panel
		switch {
		case pr.Panel != nil:
			ps = append(ps, *pr.Panel)
		case pr.RowPanel != nil:
			if pr.RowPanel.Id == 0 || ids[pr.RowPanel.Id] {
				t.Errorf("row %v: id %d missing or repeated", pr.RowPanel.Title, pr.RowPanel.Id)
			}
			ids[pr.RowPanel.Id] = true
			ps = append(ps, pr.RowPanel.Panels...)
		}
		for _, p := range ps {
			title := ""
			if p.Title != nil {
				title = *p.Title
			}
			if !panelTypes[p.Type] {
				t.Errorf("panel %q: type %q is not one of %v", title, p.Type, panelTypes)
			}
			if p.Id == nil || ids[*p.Id] {
				t.Errorf("panel %q: id missing or repeated", title)
			} else {
				ids[*p.Id] = true
			}
			if p.GridPos == nil || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.W == 0 || p.GridPos.H == 0 {
				t.Errorf("panel %q: grid position %+v outside the 24 columns", title, p.GridPos)
			}
			if !promVariable(p.Datasource) {
				t.Errorf("panel %q: datasource %+v, want the ${datasource} variable", title, p.Datasource)
			}
			if p.Description == nil || *p.Description == "" {
				t.Errorf("panel %q: no description saying what it shows", title)
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q: no query", title)
			}
			for _, q := range p.Targets {
				pq, ok := q.(*prometheus.Dataquery)
				if !ok {
					t.Errorf("panel %q: a %T query, want Prometheus'", title, q)
					continue
				}
				queries++
				if pq.Expr == "" || !promVariable(pq.Datasource) {
					t.Errorf("panel %q query %v: expr %q, datasource %+v", title, pq.RefId, pq.Expr, pq.Datasource)
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("%d queries decoded as Prometheus', want the dashboard's", queries)
	}
}

// buildErr is err, or nil for the SDK's empty list of errors, which it
// returns as a non-nil error when there were none.
func buildErr(err error) error {
	var errs cog.BuildErrors
	if errors.As(err, &errs) && len(errs) == 0 {
		return nil
	}
	return err
}

func promVariable(ref any) bool {
	b, err := json.Marshal(ref)
	return err == nil && string(b) == `{"type":"prometheus","uid":"${datasource}"}`
}

// TestDashboardQueriesParse sends every panel's PromQL, with Grafana's
// variables replaced by their defaults, to a real Prometheus: any query
// it refuses (bad syntax, a function that does not exist, mismatched
// types) fails. Whether they find data is the lab's Prometheus test's
// (internal/lab).
func TestDashboardQueriesParse(t *testing.T) {
	testenv.NeedCommand(t, "prometheus", "prometheus")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	// Prometheus needs something to scrape; nothing answers on port 1,
	// which is fine: the queries are parsed and evaluated on no data.
	s, err := metrics.StartPrometheus(ctx, metrics.PromServerOptions{Dir: dir,
		Targets: []metrics.ScrapeTarget{{Job: "none", Address: "127.0.0.1:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	n := 0
	for _, name := range Files() {
		qs, err := Queries(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			expr := Expand(q.Expr, "1m", DefaultVariables)
			if strings.Contains(expr, "$") {
				t.Errorf("%s %q %s: a variable left unreplaced in %s", name, q.Panel, q.RefID, expr)
				continue
			}
			if _, err := s.SeriesCount(ctx, expr, time.Time{}); err != nil {
				t.Errorf("%s %q %s: %v", name, q.Panel, q.RefID, err)
			}
			n++
		}
	}
	if n < 30 {
		t.Errorf("checked %d queries; the dashboards have more", n)
	}
	// The check can fail: Prometheus refuses a broken query.
	if _, err := s.SeriesCount(ctx, Expand(`sum by (le) (rate(pilot_xds_pushes[$__rate_interval])`, "1m", nil), time.Time{}); err == nil {
		t.Error("Prometheus took an unbalanced query")
	}
	_ = os.RemoveAll(filepath.Join(dir, "data"))
}
