package metrics

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ScrapeJob is the job name the started Prometheus gives the control plane.
const ScrapeJob = "pilot"

// PromServerOptions configure a Prometheus started for one test.
type PromServerOptions struct {
	Binary   string        // "prometheus" (from PATH) if empty
	Target   string        // the control plane's monitoring address, host:port
	Interval time.Duration // scrape interval; 1s if zero
	Dir      string        // config and storage; removed by the caller
}

// PromServer is a running Prometheus.
type PromServer struct {
	*PromClient
	cmd  *exec.Cmd
	done chan struct{}
	log  bytes.Buffer
}

// StartPrometheus runs Debian's prometheus binary on a free loopback port
// with a generated config that scrapes o.Target every o.Interval, and
// returns once it answers /-/ready.
func StartPrometheus(ctx context.Context, o PromServerOptions) (*PromServer, error) {
	if o.Binary == "" {
		o.Binary = "prometheus"
	}
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	bin, err := exec.LookPath(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("--prometheus needs the prometheus server binary (apt-get install prometheus): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n- job_name: %s\n  static_configs:\n  - targets: [%q]\n",
		promDuration(o.Interval), promDuration(o.Interval), ScrapeJob, o.Target)
	cfgPath := filepath.Join(o.Dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("writing Prometheus' config: %w", err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	s := &PromServer{done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(o.Dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting prometheus: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	s.PromClient = &PromClient{URL: "http://" + addr, HTTP: &http.Client{Timeout: 30 * time.Second}}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// promDuration formats d as Prometheus' duration syntax (whole milliseconds).
func promDuration(d time.Duration) string { return fmt.Sprintf("%dms", max(d.Milliseconds(), 1)) }

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
		case <-s.done:
			return fmt.Errorf("prometheus exited at start: %s", lastLine(s.log.String()))
		case <-ctx.Done():
			return fmt.Errorf("prometheus did not become ready at %s: %w", s.URL, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop ends Prometheus (SIGTERM, then SIGKILL after 10s) and waits for it.
func (s *PromServer) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for Prometheus: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func lastLine(s string) string {
	b := bytes.TrimSpace([]byte(s))
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}
