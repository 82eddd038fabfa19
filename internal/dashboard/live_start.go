package dashboard

import (
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/meshperf/meshperf/internal/lab/scenario"
	"github.com/meshperf/meshperf/internal/live"
	"github.com/meshperf/meshperf/internal/proc"
)

// labStopGrace is how long a stopped lab run may take to clean up.
const labStopGrace = 60 * time.Second

// LabRunConfig says how the dashboard starts a lab run: `meshperf lab run
// SCENARIO` as its own child, publishing to the dashboard.
type LabRunConfig struct {
	// Executable is meshperf (the dashboard's own binary).
	Executable string
	// DB is the results store the run writes: the dashboard's own.
	DB string
	// OutRoot holds each run's output directory, named by its session.
	OutRoot string
	// SelfURL is how the run reaches the dashboard, e.g. http://127.0.0.1:8088.
	SelfURL string
	// Token is the dashboard's token, passed in the environment.
	Token string
	Log   *slog.Logger
}

// LabRunner runs at most one lab at a time for the dashboard. Stop ends
// the one running; the caller calls it before exiting.
type LabRunner struct {
	cfg     LabRunConfig
	mu      sync.Mutex
	running *proc.Process
	watched sync.WaitGroup
}

// NewLabRunner returns a runner that has started nothing yet.
func NewLabRunner(cfg LabRunConfig) *LabRunner {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &LabRunner{cfg: cfg}
}

// start runs the shipped scenario name in a new session of hub and
// returns its id. The scenario bounds the run's duration (its matrix and
// each run's time); Stop or the run's own end bound the process.
func (lr *LabRunner) start(hub *liveHub, name string) (string, error) {
	if _, err := scenario.Get(name); err != nil {
		return "", badRequest("%v", err)
	}
	lr.mu.Lock()
	defer lr.mu.Unlock()
	if lr.running != nil {
		return "", requestError{http.StatusConflict, "a lab run started here is still running: one at a time"}
	}
	id, err := hub.open(live.Opening{Source: live.SourceLab, Scenario: name, Label: "started from the dashboard"})
	if err != nil {
		return "", requestError{http.StatusServiceUnavailable, err.Error()}
	}
	out := filepath.Join(lr.cfg.OutRoot, "live-"+id)
	if err := os.MkdirAll(out, 0o755); err != nil {
		hub.fail(id, "output directory: "+err.Error())
		return "", fmt.Errorf("lab run output directory: %w", err)
	}
	env := os.Environ()
	if lr.cfg.Token != "" {
		env = append(env, live.TokenEnv+"="+lr.cfg.Token)
	}
	p, err := proc.Start(proc.Spec{
		Name: "lab run " + name, Path: lr.cfg.Executable, Env: env,
		Args: []string{"lab", "run", "--dashboard", lr.cfg.SelfURL, "--dashboard-session", id,
			"--db", lr.cfg.DB, "--out", out, name},
		LogPath: filepath.Join(out, "lab-run.log"),
		// On SIGTERM the lab stops its pods and removes their namespaces
		// and links; SIGKILL before it is done would leave them behind.
		StopGrace: labStopGrace,
	})
	if err != nil {
		hub.fail(id, err.Error())
		return "", fmt.Errorf("start the lab run: %w", err)
	}
	lr.cfg.Log.Info("lab run started", "scenario", name, "session", id, "pid", p.PID(), "out", out)
	lr.running = p
	lr.watched.Add(1)
	go lr.watch(hub, id, p)
	return id, nil
}

// watch waits for the run to exit; one that exits without ending its
// session (it failed before it could publish, or was killed) fails it
// with the reason, so the page does not show it running for ever.
func (lr *LabRunner) watch(hub *liveHub, id string, p *proc.Process) {
	defer lr.watched.Done()
	<-p.Done()
	reason := "the lab run exited without ending its session"
	if p.Wait() != nil {
		reason = "lab run: " + p.ExitReason()
		if last := p.LastLine(); last != "" {
			reason += ": " + last
		}
	}
	hub.fail(id, reason)
	lr.cfg.Log.Info("lab run exited", "session", id, "reason", p.ExitReason())
	lr.mu.Lock()
	lr.running = nil
	lr.mu.Unlock()
}

// Stop stops the running lab, if any (SIGTERM: the lab cleans up), and
// waits for it.
func (lr *LabRunner) Stop() {
	lr.mu.Lock()
	p := lr.running
	lr.mu.Unlock()
	if p != nil {
		_ = p.Stop()
	}
	lr.watched.Wait()
}

// liveStart is POST /api/live/start {"scenario": NAME}.
func (s *server) liveStart(r *http.Request) (int, any, error) {
	if s.labs == nil {
		return 0, nil, notFound("this dashboard starts no runs")
	}
	var body struct {
		Scenario string `json:"scenario"`
	}
	if err := decodeBody(r, &body); err != nil {
		return 0, nil, err
	}
	if body.Scenario == "" {
		return 0, nil, badRequest("no scenario: want {\"scenario\": NAME}, one of %v", scenario.Names())
	}
	id, err := s.labs.start(s.live, body.Scenario)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusCreated, map[string]string{"id": id}, nil
}
