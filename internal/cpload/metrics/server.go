package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/syscmd"
)

// ScrapeJob is the job name the started Prometheus gives the control plane.
const ScrapeJob = "pilot"

// PromServerOptions configure a Prometheus started for one test.
type PromServerOptions struct {
	Binary   string         // "prometheus" (from PATH) if empty
	Targets  []ScrapeTarget // what to scrape
	Interval time.Duration  // scrape interval; 1s if zero
	Dir      string         // config and storage; removed by the caller
}

// ScrapeTarget is one endpoint Prometheus scrapes.
type ScrapeTarget struct {
	Job     string // the job label; targets of one job share its scrape config
	Address string // host:port
	Path    string // metrics path; /metrics if empty
	// Labels are added to every series scraped from the target, e.g. the
	// lab's role="client-sidecar", so that queries can pick one process.
	Labels map[string]string
}

// PromServer is a running Prometheus.
type PromServer struct {
	*PromClient
	p *proc.Process
}

// promStopGrace is how long Prometheus gets to close its database.
const promStopGrace = 10 * time.Second

// StartPrometheus runs Debian's prometheus binary on loopback with a
// generated config that scrapes o.Target every o.Interval, and returns once
// it answers /-/ready. Prometheus cannot write a ready file, so it binds port
// 0 and its address is read from the kernel's list of its listening sockets
// (proc.WaitListening): nothing is picked in advance, which another process
// could take between the pick and the bind, and what answers there is
// certainly this Prometheus.
func StartPrometheus(ctx context.Context, o PromServerOptions) (*PromServer, error) {
	if o.Binary == "" {
		o.Binary = "prometheus"
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	bin, err := syscmd.Find(o.Binary, "prometheus")
	if err != nil {
		return nil, fmt.Errorf("--prometheus needs the prometheus server: %w", err)
	}
	cfg, err := promConfig(o)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(o.Dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return nil, fmt.Errorf("writing Prometheus' config: %w", err)
	}
	p, err := proc.Start(proc.Spec{Name: "prometheus", Path: bin, Args: []string{"--config.file=" + cfgPath,
		"--storage.tsdb.path=" + filepath.Join(o.Dir, "data"), "--web.listen-address=127.0.0.1:0", "--log.level=warn"},
		LogPath: filepath.Join(o.Dir, "prometheus.log"), StopGrace: promStopGrace})
	if err != nil {
		return nil, err
	}
	s := &PromServer{p: p}
	// Its web server (UI and API) is the one socket it listens on.
	addrs, err := p.WaitListening(ctx, 30*time.Second)
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.PromClient = &PromClient{URL: "http://" + addrs[0].String(), HTTP: &http.Client{Timeout: 30 * time.Second}}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// promConfig is Prometheus' configuration for o: one scrape config per
// job, one static config per target (each with its labels). It is written
// as JSON, which is YAML.
func promConfig(o PromServerOptions) ([]byte, error) {
	type staticConfig struct {
		Targets []string          `json:"targets"`
		Labels  map[string]string `json:"labels,omitempty"`
	}
	type scrapeConfig struct {
		JobName       string         `json:"job_name"`
		MetricsPath   string         `json:"metrics_path"`
		StaticConfigs []staticConfig `json:"static_configs"`
	}
	var jobs []*scrapeConfig
	byJob := map[string]*scrapeConfig{}
	for _, t := range o.Targets {
		path := t.Path
		if path == "" {
			path = "/metrics"
		}
		j := byJob[t.Job]
		if j == nil {
			j = &scrapeConfig{JobName: t.Job, MetricsPath: path}
			byJob[t.Job] = j
			jobs = append(jobs, j)
		}
		if j.MetricsPath != path {
			return nil, fmt.Errorf("prometheus job %s: targets with different metrics paths (%s, %s)", t.Job, j.MetricsPath, path)
		}
		j.StaticConfigs = append(j.StaticConfigs, staticConfig{Targets: []string{t.Address}, Labels: t.Labels})
	}
	if len(jobs) == 0 {
		return nil, errors.New("prometheus: nothing to scrape")
	}
	interval := promDuration(o.Interval)
	return json.MarshalIndent(map[string]any{
		"global":         map[string]string{"scrape_interval": interval, "scrape_timeout": interval},
		"scrape_configs": jobs,
	}, "", "  ")
}

// promDuration formats d as Prometheus' duration syntax (whole milliseconds).
func promDuration(d time.Duration) string { return fmt.Sprintf("%dms", max(d.Milliseconds(), 1)) }

// waitReady waits for /-/ready: Prometheus listens before it has loaded
// its database and config.
func (s *PromServer) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
		if resp, err := s.HTTP.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-s.p.Done():
			return errors.New(s.p.ExitReason())
		case <-ctx.Done():
			return fmt.Errorf("prometheus did not become ready at %s: %w (log: %s)", s.URL, ctx.Err(), s.p.LogPath())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PID is the Prometheus process's id.
func (s *PromServer) PID() int { return s.p.PID() }

// Stop ends Prometheus (SIGTERM, then SIGKILL after 10s) and waits for it.
func (s *PromServer) Stop() {
	if s == nil {
		return
	}
	_ = s.p.Stop()
}
