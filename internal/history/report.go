package history

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the series, one row per point with a marker where a
// change point is, then the change points.
func WriteTable(w io.Writer, a Analysis) error {
	s := a.Series
	var b strings.Builder
	fmt.Fprintf(&b, "%s of %s, by %s\n", s.Metric.Name, s.Cell(), s.By)
	fmt.Fprintf(&b, "machine: %s", s.Machine)
	if s.MachineChoice != "" {
		fmt.Fprintf(&b, " (%s)", s.MachineChoice)
	}
	b.WriteString("\n\n")
	at := map[int]Change{}
	for _, c := range a.Changes {
		at[c.Index] = c
	}
	var table strings.Builder
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "#\t%s\trun id\truns\t%s %s\n", s.By, s.Metric.Name, s.Metric.Unit)
	for i, p := range s.Points {
		marker := ""
		if c, ok := at[i]; ok {
			marker = "<- " + c.Verdict + " " + percent(c.Relative)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", i+1, p.Group, p.RunID, p.Runs, a.value(p.Value), marker)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// tabwriter pads the value column for the marker even where there is
	// none.
	for line := range strings.Lines(table.String()) {
		b.WriteString(strings.TrimRight(line, " \n") + "\n")
	}
	b.WriteString("\n")
	if a.Detected {
		a.writeChanges(&b)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (a Analysis) writeChanges(b *strings.Builder) {
	o := a.Options
	fmt.Fprintf(b, "change points (E-Divisive means, %d permutations, p <= %v, at least %d points a side, threshold %s):\n",
		o.Permutations, o.Significance, o.MinSegment, strconv.FormatFloat(100*o.Threshold, 'g', -1, 64)+"%")
	if len(a.Changes) == 0 {
		b.WriteString("  none: the series is level within its noise\n")
	}
	unit := a.Series.Metric.Unit
	for _, c := range a.Changes {
		fmt.Fprintf(b, "  %s at #%d: %s -> %s, %s -> %s %s (%s %s, %s), p = %.3f\n", c.Verdict, c.Index+1,
			c.GroupBefore, c.GroupAfter, a.value(c.Before), a.value(c.After), unit,
			a.signed(c.Absolute), unit, percent(c.Relative), c.PValue)
	}
	if a.ShortForSignificance {
		fmt.Fprintf(b, "note: with %d points a change is unlikely to reach p <= %v; a clean step needs about %d\n",
			a.present(), o.Significance, o.MinPoints())
	}
}

func (a Analysis) present() int {
	n := 0
	for _, p := range a.Series.Points {
		if finite(p.Value) {
			n++
		}
	}
	return n
}

func (a Analysis) value(v float64) string {
	if !finite(v) {
		return "n/a"
	}
	return strconv.FormatFloat(v, 'f', a.Series.Metric.Decimals, 64)
}

func (a Analysis) signed(v float64) string {
	s := a.value(v)
	if finite(v) && v >= 0 {
		s = "+" + s
	}
	return s
}

func percent(v float64) string {
	if !finite(v) {
		return "n/a %"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

// WriteJSON prints the analysis as one JSON document; missing figures are
// null.
func WriteJSON(w io.Writer, a Analysis) error {
	s := a.Series
	doc := jsonReport{
		Scenario: s.Scenario, Machine: s.Machine, MachineChoice: s.MachineChoice,
		Mode: s.Mode, ParamsHash: s.ParamsHash,
		Metric: s.Metric.Name, Unit: s.Metric.Unit, By: string(s.By),
		Method: jsonMethod{
			Name: "e-divisive means", Permutations: a.Options.Permutations, Significance: a.Options.Significance,
			MinSegment: a.Options.MinSegment, Threshold: a.Options.Threshold, Seed: a.Options.Seed,
		},
		Points:       []jsonPoint{},
		ChangePoints: []jsonChange{},
		Detected:     a.Detected,
		Regression:   a.Regressed(),
	}
	if !s.Metric.ControlPlane() {
		doc.QPS, doc.Connections = &s.QPS, &s.Connections
	}
	for _, p := range s.Points {
		doc.Points = append(doc.Points, jsonPoint{Group: p.Group, RunID: p.RunID, Start: p.Start.UTC(), Runs: p.Runs, Value: orNil(p.Value)})
	}
	for _, c := range a.Changes {
		doc.ChangePoints = append(doc.ChangePoints, jsonChange{
			Index: c.Index, GroupBefore: c.GroupBefore, GroupAfter: c.GroupAfter,
			RunIDBefore: c.RunIDBefore, RunIDAfter: c.RunIDAfter,
			Before: orNil(c.Before), After: orNil(c.After), Absolute: orNil(c.Absolute), Relative: orNil(c.Relative),
			PValue: c.PValue, Verdict: c.Verdict,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

type jsonReport struct {
	Scenario      string       `json:"scenario"` // a cpload series' shape
	Machine       string       `json:"machine"`
	MachineChoice string       `json:"machine_choice,omitempty"`
	Mode          string       `json:"mode,omitempty"`
	QPS           *int         `json:"qps,omitempty"` // 0: as fast as possible
	Connections   *int         `json:"connections,omitempty"`
	ParamsHash    string       `json:"params_hash,omitempty"` // a cpload series' parameters
	Metric        string       `json:"metric"`
	Unit          string       `json:"unit"`
	By            string       `json:"by"`
	Method        jsonMethod   `json:"method"`
	Points        []jsonPoint  `json:"points"`
	Detected      bool         `json:"detected"` // false: too few points, change_points is empty
	ChangePoints  []jsonChange `json:"change_points"`
	Regression    bool         `json:"regression"` // the newest change point beyond the threshold is a regression
}

type jsonMethod struct {
	Name         string  `json:"name"`
	Permutations int     `json:"permutations"`
	Significance float64 `json:"significance"`
	MinSegment   int     `json:"min_segment"`
	Threshold    float64 `json:"threshold"`
	Seed         uint64  `json:"seed"`
}

type jsonPoint struct {
	Group string    `json:"group"`
	RunID string    `json:"run_id"`
	Start time.Time `json:"start"`
	Runs  int       `json:"runs"`
	Value *float64  `json:"value"`
}

type jsonChange struct {
	Index       int      `json:"index"`
	GroupBefore string   `json:"group_before"`
	GroupAfter  string   `json:"group_after"`
	RunIDBefore string   `json:"run_id_before"`
	RunIDAfter  string   `json:"run_id_after"`
	Before      *float64 `json:"before"`
	After       *float64 `json:"after"`
	Absolute    *float64 `json:"absolute"`
	Relative    *float64 `json:"relative"`
	PValue      float64  `json:"p_value"`
	Verdict     string   `json:"verdict"`
}
