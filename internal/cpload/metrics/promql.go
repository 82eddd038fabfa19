package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The queries of Istio in Action chapter 11, verbatim. The book's
// performance-test.sh prints the push count (the change in pilot_xds_pushes
// over the test, summed over types) and "Latency in the last minute", the
// P99 of pilot_proxy_convergence_time.
const (
	PushCountQuery = `sum(pilot_xds_pushes)`
	ConvergenceP50 = `histogram_quantile(0.5, sum(rate(pilot_proxy_convergence_time_bucket[1m])) by (le))`
	ConvergenceP90 = `histogram_quantile(0.9, sum(rate(pilot_proxy_convergence_time_bucket[1m])) by (le))`
	ConvergenceP99 = `histogram_quantile(0.99, sum(rate(pilot_proxy_convergence_time_bucket[1m])) by (le))`
)

// PromClient asks a Prometheus server instant queries over its HTTP API.
type PromClient struct {
	// URL is the server, e.g. http://127.0.0.1:9090 (a bare host:port means
	// http).
	URL  string
	HTTP *http.Client
}

// NewPromClient checks and normalises a --prom-url value.
func NewPromClient(raw string) (*PromClient, error) {
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("--prom-url %q: want http://HOST:PORT of a Prometheus server", raw)
	}
	return &PromClient{URL: strings.TrimSuffix(u.String(), "/"), HTTP: &http.Client{Timeout: 30 * time.Second}}, nil
}

type promAnswer struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// Query evaluates expr at the instant at (now if zero) and returns its one
// value: a scalar, or the single sample of a vector. An empty vector is NaN
// (nothing to compute from, e.g. no pushes in the window); a vector of
// several samples is an error.
func (c *PromClient) Query(ctx context.Context, expr string, at time.Time) (float64, error) {
	a, err := c.query(ctx, expr, at)
	if err != nil {
		return 0, err
	}
	return parseResult(expr, a.Data.ResultType, a.Data.Result)
}

// SeriesCount evaluates expr at the instant at (now if zero) and returns
// how many series its answer has (a scalar is one): for checking that a
// query, e.g. a dashboard's, is valid PromQL and finds data.
func (c *PromClient) SeriesCount(ctx context.Context, expr string, at time.Time) (int, error) {
	a, err := c.query(ctx, expr, at)
	if err != nil {
		return 0, err
	}
	if a.Data.ResultType == "scalar" || a.Data.ResultType == "string" {
		return 1, nil
	}
	var series []json.RawMessage
	if err := json.Unmarshal(a.Data.Result, &series); err != nil {
		return 0, fmt.Errorf("PromQL %s: bad %s: %w", expr, a.Data.ResultType, err)
	}
	return len(series), nil
}

// query asks the instant-query API and returns its successful answer.
func (c *PromClient) query(ctx context.Context, expr string, at time.Time) (promAnswer, error) {
	var a promAnswer
	q := url.Values{"query": {expr}}
	if !at.IsZero() {
		q.Set("time", strconv.FormatFloat(float64(at.UnixNano())/1e9, 'f', 3, 64))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL+"/api/v1/query", strings.NewReader(q.Encode()))
	if err != nil {
		return a, fmt.Errorf("PromQL %s: %w", expr, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	client := c.HTTP
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, fmt.Errorf("PromQL %s: cannot reach Prometheus at %s: %w", expr, c.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return a, fmt.Errorf("PromQL %s: reading the answer: %w", expr, err)
	}
	if err := json.Unmarshal(body, &a); err != nil {
		return a, fmt.Errorf("PromQL %s: %s answered %s, not the query API's JSON", expr, c.URL, resp.Status)
	}
	if a.Status != "success" {
		return a, fmt.Errorf("PromQL %s: %s: %s", expr, a.ErrorType, a.Error)
	}
	return a, nil
}

func parseResult(expr, kind string, raw json.RawMessage) (float64, error) {
	var sample []any
	switch kind {
	case "scalar":
		if err := json.Unmarshal(raw, &sample); err != nil {
			return 0, fmt.Errorf("PromQL %s: bad scalar: %w", expr, err)
		}
	case "vector":
		var v []struct {
			Value []any `json:"value"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return 0, fmt.Errorf("PromQL %s: bad vector: %w", expr, err)
		}
		switch len(v) {
		case 0:
			return math.NaN(), nil
		case 1:
			sample = v[0].Value
		default:
			return 0, fmt.Errorf("PromQL %s: %d series; want one (aggregate it)", expr, len(v))
		}
	default:
		return 0, fmt.Errorf("PromQL %s: a %s result; want a scalar or a vector", expr, kind)
	}
	if len(sample) != 2 {
		return 0, fmt.Errorf("PromQL %s: a sample of %d fields, want [time, value]", expr, len(sample))
	}
	s, ok := sample[1].(string)
	if !ok {
		return 0, fmt.Errorf("PromQL %s: the value is not a string", expr)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("PromQL %s: value %q: %w", expr, s, err)
	}
	return v, nil
}

// LastScrape is when Prometheus last scraped every target of job (the
// oldest timestamp of their up samples), zero when it has not yet.
func (c *PromClient) LastScrape(ctx context.Context, job string) (time.Time, error) {
	v, err := c.Query(ctx, `min(timestamp(up{job="`+job+`"}))`, time.Time{})
	if err != nil || math.IsNaN(v) {
		return time.Time{}, err
	}
	return time.Unix(0, int64(v*1e9)), nil
}

// WaitScrapedAfter returns once Prometheus has scraped every target of job
// after t, so that
// a query at its time sees everything the target had at t.
func (c *PromClient) WaitScrapedAfter(ctx context.Context, job string, t time.Time) error {
	for {
		last, err := c.LastScrape(ctx, job)
		if err == nil && last.After(t) {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("waiting for Prometheus to scrape %s: %w", job, err)
			}
			return fmt.Errorf("waiting for Prometheus to scrape %s after %s (last %s): %w", job, t.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
