// Package metrics reads a control plane's figures the two ways an operator
// does: by scraping its Prometheus /metrics endpoint directly and computing
// deltas and quantiles here (histogram_quantile's arithmetic on bucket
// deltas), or by asking a real Prometheus server the PromQL that Istio in
// Action's chapter 11 uses, verbatim. It can also run Debian's prometheus
// binary for the length of a test, scraping the control plane.
package metrics

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Snapshot is one scrape of a /metrics endpoint.
type Snapshot struct {
	At       time.Time
	Families map[string]*dto.MetricFamily
}

// Scrape reads url (a /metrics endpoint in Prometheus' text format).
func Scrape(ctx context.Context, client *http.Client, url string) (*Snapshot, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	// Ask for the text format: the parser below reads only that.
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	at := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scraping %s: answered %s", url, resp.Status)
	}
	s, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scraping %s: %w", url, err)
	}
	s.At = at
	return s, nil
}

// Parse reads Prometheus' text exposition format.
func Parse(r io.Reader) (*Snapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return &Snapshot{At: time.Now(), Families: fams}, nil
}

// value is a counter's, gauge's or untyped metric's value.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Sum adds up every series of name (0 when absent): sum(name) in PromQL.
func (s *Snapshot) Sum(name string) float64 {
	total := 0.0
	if s == nil {
		return 0
	}
	for _, m := range s.Families[name].GetMetric() {
		total += value(m)
	}
	return total
}

// Has says whether the snapshot holds name.
func (s *Snapshot) Has(name string) bool { return s != nil && s.Families[name] != nil }

// By sums the series of name by the value of label: sum(name) by (label).
func (s *Snapshot) By(name, label string) map[string]float64 {
	out := map[string]float64{}
	if s == nil {
		return out
	}
	for _, m := range s.Families[name].GetMetric() {
		key := ""
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				key = lp.GetValue()
			}
		}
		out[key] += value(m)
	}
	return out
}

// Histogram is a cumulative histogram summed over series, as
// sum(x_bucket) by (le) gives it.
type Histogram struct {
	// Bounds are the finite upper bounds, ascending; Counts[i] is the number
	// of observations <= Bounds[i]. Count is the total (the +Inf bucket).
	Bounds []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// Histogram sums every series of the histogram name (a zero Histogram when
// absent).
func (s *Snapshot) Histogram(name string) Histogram { return s.HistogramWhere(name, "", "") }

// HistogramWhere sums the series of the histogram name whose label has the
// value (every series when label is empty).
func (s *Snapshot) HistogramWhere(name, label, value string) Histogram {
	byBound := map[float64]float64{}
	var h Histogram
	if s == nil {
		return h
	}
	for _, m := range s.Families[name].GetMetric() {
		hm := m.GetHistogram()
		if hm == nil || (label != "" && labelValue(m, label) != value) {
			continue
		}
		h.Count += float64(hm.GetSampleCount())
		h.Sum += hm.GetSampleSum()
		for _, b := range hm.GetBucket() {
			if math.IsInf(b.GetUpperBound(), +1) {
				continue // the count above is the +Inf bucket
			}
			byBound[b.GetUpperBound()] += float64(b.GetCumulativeCount())
		}
	}
	for b := range byBound {
		h.Bounds = append(h.Bounds, b)
	}
	sort.Float64s(h.Bounds)
	for _, b := range h.Bounds {
		h.Counts = append(h.Counts, byBound[b])
	}
	return h
}

// HistogramCountBy counts the observations of the histogram name by the
// value of label: sum(name_count) by (label).
func (s *Snapshot) HistogramCountBy(name, label string) map[string]float64 {
	out := map[string]float64{}
	if s == nil {
		return out
	}
	for _, m := range s.Families[name].GetMetric() {
		hm := m.GetHistogram()
		if hm == nil {
			continue
		}
		out[labelValue(m, label)] += float64(hm.GetSampleCount())
	}
	return out
}

// SumWhere adds up the series of name whose labels include every pair in
// want (0 when none): sum(name{k="v",...}) in PromQL.
func (s *Snapshot) SumWhere(name string, want map[string]string) float64 {
	total := 0.0
	if s == nil {
		return total
	}
	for _, m := range s.Families[name].GetMetric() {
		if hasLabels(m, want) {
			total += value(m)
		}
	}
	return total
}

// FirstWhere is the first series of name whose labels include every pair
// in want: its value, and its timestamp (ms since the epoch) when the
// exposition gave one (the kubelet's does), else 0.
func (s *Snapshot) FirstWhere(name string, want map[string]string) (v float64, timestampMS int64, ok bool) {
	if s == nil {
		return 0, 0, false
	}
	for _, m := range s.Families[name].GetMetric() {
		if hasLabels(m, want) {
			return value(m), m.GetTimestampMs(), true
		}
	}
	return 0, 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == k {
				found = lp.GetValue() == v
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func labelValue(m *dto.Metric, label string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == label {
			return lp.GetValue()
		}
	}
	return ""
}

// Merge returns one snapshot holding every series of snaps, as a
// Prometheus query over several targets sees them: sums and histograms
// over it add up the targets.
func Merge(snaps ...*Snapshot) *Snapshot {
	out := &Snapshot{Families: map[string]*dto.MetricFamily{}}
	for _, s := range snaps {
		if s == nil {
			continue
		}
		for name, f := range s.Families {
			m := out.Families[name]
			if m == nil {
				m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type}
				out.Families[name] = m
			}
			m.Metric = append(m.Metric, f.Metric...)
		}
	}
	return out
}

// Sub returns h - earlier, bucket by bucket: the observations made between
// two scrapes. Buckets missing from earlier count as zero (a series that
// appeared in between).
func (h Histogram) Sub(earlier Histogram) Histogram {
	prev := map[float64]float64{}
	for i, b := range earlier.Bounds {
		prev[b] = earlier.Counts[i]
	}
	out := Histogram{Bounds: append([]float64(nil), h.Bounds...), Count: h.Count - earlier.Count, Sum: h.Sum - earlier.Sum}
	for i, b := range h.Bounds {
		out.Counts = append(out.Counts, h.Counts[i]-prev[b])
	}
	return out
}

// Quantile is PromQL's histogram_quantile(q, ...) over h: the rank q*Count
// is found in the first bucket whose cumulative count reaches it and
// interpolated linearly inside that bucket, whose lower bound is the
// previous bucket's upper bound (0 for the first bucket when its bound is
// positive). A rank in the +Inf bucket answers the highest finite bound. No
// observations give NaN; q outside [0, 1] gives -Inf or +Inf, as PromQL does.
func (h Histogram) Quantile(q float64) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	case h.Count <= 0 || len(h.Bounds) == 0:
		return math.NaN()
	}
	rank := q * h.Count
	i := sort.Search(len(h.Counts), func(i int) bool { return h.Counts[i] >= rank })
	if i == len(h.Counts) {
		return h.Bounds[len(h.Bounds)-1]
	}
	lower, below := 0.0, 0.0
	if i > 0 {
		lower, below = h.Bounds[i-1], h.Counts[i-1]
	} else if h.Bounds[0] <= 0 {
		return h.Bounds[0]
	}
	upper, in := h.Bounds[i], h.Counts[i]-below
	if in <= 0 {
		return upper
	}
	return lower + (upper-lower)*(rank-below)/in
}
