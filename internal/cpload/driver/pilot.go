package driver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"
)

// PilotOptions start meshperf pilot as a subprocess.
type PilotOptions struct {
	// Command runs meshperf pilot; default this executable with "pilot".
	// Loopback port-0 addresses, --dataDir and --meshConfig are appended.
	Command []string
	DataDir string
	// MeshConfig is mesh config YAML, written beside the store; none if
	// empty.
	MeshConfig string
	// Env are KEY=VALUE pairs added to this process' environment (the
	// PILOT_* knobs).
	Env []string
}

// PilotProcess is a running meshperf pilot.
type PilotProcess struct {
	XDSAddr    string // host:port of plaintext ADS
	APIURL     string // http://host:port of the config API
	MetricsURL string // http://host:port/metrics
	PID        int

	cmd    *exec.Cmd
	done   chan struct{}
	mu     sync.Mutex
	stderr bytes.Buffer // its last output, for error messages
}

var addrLine = regexp.MustCompile(`xDS on (\S+), API on (\S+), metrics on (\S+)`)

// StartPilot starts meshperf pilot and returns once it has printed its
// addresses.
func StartPilot(ctx context.Context, o PilotOptions) (*PilotProcess, error) {
	argv := o.Command
	if len(argv) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding meshperf to run its pilot: %w", err)
		}
		argv = []string{exe, "pilot"}
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("pilot's data directory: %w", err)
	}
	args := append(append([]string(nil), argv[1:]...), "--grpcAddr", "127.0.0.1:0", "--httpAddr", "127.0.0.1:0",
		"--monitoringAddr", "127.0.0.1:0", "--dataDir", o.DataDir, "--log_output_level", "warn")
	if o.MeshConfig != "" {
		path := filepath.Join(o.DataDir, "mesh.yaml")
		if err := os.WriteFile(path, []byte(o.MeshConfig), 0o644); err != nil {
			return nil, fmt.Errorf("writing the mesh config: %w", err)
		}
		args = append(args, "--meshConfig", path)
	}
	p := &PilotProcess{done: make(chan struct{})}
	p.cmd = exec.Command(argv[0], args...)
	p.cmd.Env = append(os.Environ(), o.Env...)
	p.cmd.Stderr = &lockedWriter{mu: &p.mu, w: &p.stderr}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	p.PID = p.cmd.Process.Pid
	lines := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := addrLine.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case lines <- m:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	select {
	case m := <-lines:
		p.XDSAddr, p.APIURL, p.MetricsURL = m[1], m[2], m[3]
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("meshperf pilot exited at start: %s", p.lastOutput())
	case <-ctx.Done():
		p.Stop()
		return nil, ctx.Err()
	case <-time.After(30 * time.Second):
		p.Stop()
		return nil, errors.New("meshperf pilot did not print its addresses within 30s")
	}
}

func (p *PilotProcess) lastOutput() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	b := bytes.TrimSpace(p.stderr.Bytes())
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}

// Exited says whether the process has ended, and how.
func (p *PilotProcess) Exited() (bool, string) {
	select {
	case <-p.done:
		return true, p.lastOutput()
	default:
		return false, ""
	}
}

// Stop ends pilot (SIGTERM, SIGKILL after 10s) and waits for it.
func (p *PilotProcess) Stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// lockedWriter keeps the last 64 KiB of what it is given.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.w.Write(b)
	if l.w.Len() > 64<<10 {
		rest := append([]byte(nil), l.w.Bytes()[l.w.Len()-32<<10:]...)
		l.w.Reset()
		l.w.Write(rest)
	}
	return len(b), nil
}
