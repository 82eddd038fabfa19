package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/meshperf/meshperf/internal/cpload/shape"
	"github.com/meshperf/meshperf/internal/pilot/config"
)

// APIApplier changes config through meshperf pilot's HTTP API (what
// meshperf apply and delete call): POST /api/v1/apply and /api/v1/delete
// with a YAML body, applied atomically.
type APIApplier struct {
	URL  string // http://host:port
	HTTP *http.Client
}

// NewAPIApplier talks to the API at base (a bare host:port means http).
func NewAPIApplier(base string) *APIApplier {
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &APIApplier{URL: strings.TrimSuffix(base, "/"), HTTP: &http.Client{Timeout: 2 * time.Minute}}
}

// Apply creates or updates rs.
func (a *APIApplier) Apply(ctx context.Context, rs []*config.Resource) error {
	return a.post(ctx, "/api/v1/apply", rs)
}

// Delete deletes rs.
func (a *APIApplier) Delete(ctx context.Context, rs []*config.Resource) error {
	return a.post(ctx, "/api/v1/delete", rs)
}

func (a *APIApplier) post(ctx context.Context, path string, rs []*config.Resource) error {
	body, err := shape.YAML(rs)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/yaml")
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("cannot reach the control plane's API at %s: %w", a.URL, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode/100 != 2 {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return fmt.Errorf("the control plane refused the change: %s", e.Error)
		}
		return fmt.Errorf("the control plane at %s answered %s", a.URL, resp.Status)
	}
	return nil
}

// ConfigDumpBytes is the size of a proxy's /debug/config_dump (Envoy's
// admin JSON, as the book measures with du -sh), 0 if it cannot be had.
func (a *APIApplier) ConfigDumpBytes(ctx context.Context, proxyID string) int64 {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/debug/config_dump?proxyID="+url.QueryEscape(proxyID), nil)
	if err != nil {
		return 0
	}
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	return n
}
