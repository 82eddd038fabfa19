package proc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshperf/meshperf/internal/cli"
	"github.com/meshperf/meshperf/internal/pilot/api"
	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testutil"
)

// The test binary doubles as the children the tests need: with helperEnv
// set it runs one of the roles below instead of the tests.
const helperEnv = "MESHPERF_PROC_TEST_HELPER"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "pilot":
		os.Exit(cli.Pilot(os.Args[2:], os.Stdout, os.Stderr))
	case "listen":
		os.Exit(listenHelper(os.Args[1:]))
	}
	os.Exit(3)
}

// listenHelper listens on each address given, writes them to the ready
// file named by its first argument after an optional delay (the second),
// then echoes connections until it is killed.
func listenHelper(args []string) int {
	delay, _ := time.ParseDuration(args[1])
	r := proc.Ready{PID: os.Getpid(), Listeners: map[string]string{}}
	for i, addr := range args[2:] {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r.Listeners["l"+strconv.Itoa(i)] = ln.Addr().String()
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, ln.Addr())
				c.Close()
			}
		}()
	}
	time.Sleep(delay)
	if err := proc.WriteReady(args[0], r); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

func helperSpec(t *testing.T, role string, args ...string) proc.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return proc.Spec{Name: role + " helper", Path: exe, Args: args, Env: append(os.Environ(), helperEnv+"="+role)}
}

func start(t *testing.T, s proc.Spec) *proc.Process {
	t.Helper()
	p, err := proc.Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func signalOf(t *testing.T, p *proc.Process) syscall.Signal {
	t.Helper()
	ws, ok := p.State().Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		t.Fatalf("%s did not end by a signal: %v", p.Name(), p.State())
	}
	return ws.Signal()
}

func waitForOutput(t *testing.T, p *proc.Process, want string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(p.Tail(), want) {
			return fmt.Errorf("%s has not written %q; output so far %q", p.Name(), want, p.Tail())
		}
		return nil
	})
}

func TestStopEndsAProcessWithSIGTERM(t *testing.T) {
	p := start(t, proc.Spec{Name: "sleeper", Path: "sh", Args: []string{"-c", "echo started; exec sleep 30"}})
	waitForOutput(t, p, "started")
	if p.Exited() {
		t.Fatal("exited early")
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if !p.Exited() || signalOf(t, p) != syscall.SIGTERM {
		t.Errorf("after Stop: exited %v, state %v; want ended by SIGTERM", p.Exited(), p.State())
	}
	if err := p.Stop(); err != nil {
		t.Errorf("a second Stop: %v", err)
	}
}

// A process that ignores SIGTERM, and the child it forked (which inherits
// the ignored signal), are killed when the grace period ends.
func TestStopKillsAProcessThatIgnoresSIGTERM(t *testing.T) {
	dir := t.TempDir()
	childPID := filepath.Join(dir, "child.pid")
	script := fmt.Sprintf("trap '' TERM; sleep 30 & echo $! > %s; echo trapped; wait; wait; wait", childPID)
	p := start(t, proc.Spec{Name: "stubborn", Path: "sh", Args: []string{"-c", script},
		LogPath: filepath.Join(dir, "stubborn.log"), StopGrace: 200 * time.Millisecond})
	waitForOutput(t, p, "trapped")
	data, err := os.ReadFile(childPID)
	if err != nil {
		t.Fatal(err)
	}
	child, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if sig := signalOf(t, p); sig != syscall.SIGKILL {
		t.Errorf("ended by %v, want SIGKILL after the grace period", sig)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if running(child) {
			return fmt.Errorf("the forked child %d still runs", child)
		}
		return nil
	})
	if r := p.ExitReason(); !strings.Contains(r, "stubborn (pid ") || !strings.Contains(r, "signal: killed") || !strings.Contains(r, "trapped") {
		t.Errorf("exit reason %q: want the name, the signal and the last log line", r)
	}
}

// running reports whether pid exists and is not a zombie (killed, waiting
// for init to reap it).
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces, so read after its ')'.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return !strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

func TestExitReasonSaysStatusAndLastLine(t *testing.T) {
	script := `echo one; echo "listen tcp 127.0.0.1:1: bind: permission denied" >&2; echo; exit 3`
	for _, logPath := range []string{"", filepath.Join(t.TempDir(), "failing.log")} {
		p := start(t, proc.Spec{Name: "failing", Path: "sh", Args: []string{"-c", script}, LogPath: logPath})
		var exitErr interface{ ExitCode() int }
		if err := p.Wait(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 3 {
			t.Errorf("log %q: Wait = %v, want exit status 3", logPath, err)
		}
		want := fmt.Sprintf("failing (pid %d) exited: exit status 3; last log line: listen tcp 127.0.0.1:1: bind: permission denied", p.PID())
		if got := p.ExitReason(); got != want {
			t.Errorf("log %q: exit reason\n %q, want\n %q", logPath, got, want)
		}
		if p.LogPath() != logPath {
			t.Errorf("LogPath %q, want %q", p.LogPath(), logPath)
		}
	}
}

func TestSignalAndKill(t *testing.T) {
	p := start(t, proc.Spec{Name: "sleeper", Path: "sleep", Args: []string{"30"}})
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if sig := signalOf(t, p); sig != syscall.SIGKILL {
		t.Errorf("ended by %v, want SIGKILL", sig)
	}
	if err := p.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after exit: %v, want os.ErrProcessDone", err)
	}
	if err := p.Kill(); err != nil {
		t.Errorf("Kill after exit: %v", err)
	}
}

func TestStartFailsOnAMissingProgram(t *testing.T) {
	if _, err := proc.Start(proc.Spec{Name: "nothing", Path: "/no/such/program"}); err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("Start of a missing program: %v", err)
	}
}

func TestWaitReadyReturnsWhatTheProcessWrote(t *testing.T) {
	readyFile := filepath.Join(t.TempDir(), "helper.ready")
	// A previous run's file must not be taken for this one's.
	if err := proc.WriteReady(readyFile, proc.Ready{PID: 1, Listeners: map[string]string{"l0": "192.0.2.1:1"}}); err != nil {
		t.Fatal(err)
	}
	s := helperSpec(t, "listen", readyFile, "100ms", "127.0.0.1:0")
	s.ReadyFile = readyFile
	p := start(t, s)
	r, err := p.WaitReady(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := r.Listener("l0")
	if err != nil || r.PID != p.PID() {
		t.Fatalf("ready %+v (pid %d): %v", r, p.PID(), err)
	}
	if got := dialRead(t, addr); got != addr {
		t.Errorf("the listener in the ready file answered %q, want %q", got, addr)
	}
}

func dialRead(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, _ := c.Read(buf)
	return strings.TrimSpace(string(buf[:n]))
}

func TestWaitReadyFailsWithTheExitReason(t *testing.T) {
	p := start(t, proc.Spec{Name: "control plane", Path: "sh", ReadyFile: filepath.Join(t.TempDir(), "ready"),
		Args: []string{"-c", `echo "meshperf pilot: cannot listen on 127.0.0.1:15010: address already in use" >&2; exit 1`}})
	_, err := p.WaitReady(context.Background(), time.Hour)
	if err == nil || !strings.Contains(err.Error(), "exit status 1") || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("WaitReady: %v; want the exit status and the last log line", err)
	}
}

func TestWaitReadyGivesUp(t *testing.T) {
	s := proc.Spec{Name: "silent", Path: "sleep", Args: []string{"30"}, ReadyFile: filepath.Join(t.TempDir(), "ready")}
	p := start(t, s)
	if _, err := p.WaitReady(context.Background(), 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not write its ready file") ||
		!strings.Contains(err.Error(), "within 50ms") {
		t.Errorf("WaitReady past its timeout: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.WaitReady(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitReady with a cancelled context: %v", err)
	}
	s.ReadyFile = ""
	if _, err := start(t, s).WaitReady(context.Background(), time.Second); err == nil {
		t.Error("WaitReady without a ready file succeeded")
	}
}

// What the kernel says a process listens on matches what it bound, IPv4 and
// IPv6.
func TestWaitListeningReadsTheKernelsSockets(t *testing.T) {
	addrs := []string{"127.0.0.1:0"}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		ln.Close()
		addrs = append(addrs, "[::1]:0")
	}
	readyFile := filepath.Join(t.TempDir(), "ready")
	s := helperSpec(t, "listen", append([]string{readyFile, "0s"}, addrs...)...)
	s.ReadyFile = readyFile
	p := start(t, s)
	r, err := p.WaitReady(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.WaitListening(context.Background(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(addrs) {
		t.Fatalf("kernel lists %v, want %d listeners (%v)", got, len(addrs), r.Listeners)
	}
	for i, a := range got {
		if want := r.Listeners["l"+strconv.Itoa(i)]; a.String() != want {
			t.Errorf("listener %d: kernel says %s, the process bound %s", i, a, want)
		}
	}
	sleeper := start(t, proc.Spec{Name: "sleeper", Path: "sleep", Args: []string{"30"}})
	if _, err := sleeper.WaitListening(context.Background(), 50*time.Millisecond); err == nil {
		t.Error("WaitListening on a process without sockets succeeded")
	}
}

// TestPilotRestartsOnItsAddresses is what a control-plane crash test does:
// kill pilot, start it again where it was (its TLS listener, where node
// proxies connect, too), and find its API there.
func TestPilotRestartsOnItsAddresses(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pl, err := proc.StartPilot(ctx, proc.PilotOptions{Command: []string{exe, "pilot"}, DataDir: t.TempDir(),
		LogLevel: "warn", Env: []string{helperEnv + "=pilot"}, Secure: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Stop() })
	if _, err := os.Stat(pl.RootCertPath()); err != nil {
		t.Errorf("the CA's root for node proxies: %v", err)
	}
	for _, a := range []string{pl.Addrs.GRPC, pl.Addrs.HTTP, pl.Addrs.Monitoring, pl.Addrs.SecureGRPC} {
		if !strings.HasPrefix(a, "127.0.0.1:") || strings.HasSuffix(a, ":0") {
			t.Fatalf("addresses %+v: want bound ports on 127.0.0.1", pl.Addrs)
		}
	}
	apiReady(t, pl)
	// A connection open at the kill leaves the port with a socket in
	// TIME_WAIT, which must not keep the restart from binding it.
	conn, err := net.Dial("tcp", pl.Addrs.GRPC)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := pl.Kill(); err != nil {
		t.Fatal(err)
	}
	again, err := pl.Restart(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Stop() })
	if again.Addrs != pl.Addrs || again.PID() == pl.PID() {
		t.Errorf("restarted as pid %d on %+v; want a new process on %+v", again.PID(), again.Addrs, pl.Addrs)
	}
	apiReady(t, again)
}

func apiReady(t *testing.T, pl *proc.Pilot) {
	t.Helper()
	c, err := pl.APIClient()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Ready(context.Background()); err != nil {
		t.Errorf("pilot pid %d: %v", pl.PID(), err)
	}
}

// A pilot whose API other hosts reach gets a token, in its environment
// and not on its command line (which /proc and pprof show), kept across
// a restart; APIClient sends it, a client without it cannot write.
func TestPilotOffLoopbackHasAToken(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Setenv(api.TokenEnv, "the-parents-own")
	pl, err := proc.StartPilot(ctx, proc.PilotOptions{Command: []string{exe, "pilot"}, DataDir: t.TempDir(), Host: netip.IPv4Unspecified(),
		LogLevel: "warn", Env: []string{helperEnv + "=pilot"}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Stop() })
	token := pl.APIToken()
	if len(token) != 32 {
		t.Fatalf("APIToken %q: want a generated token off loopback", token)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pl.PID()))
	if err != nil || strings.Contains(string(cmdline), token) {
		t.Errorf("the token is on pilot's command line %q (%v)", cmdline, err)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pl.PID()))
	if err != nil || !strings.Contains(string(environ), api.TokenEnv+"="+token+"\x00") {
		t.Errorf("pilot's environment lacks %s=TOKEN (%v)", api.TokenEnv, err)
	}
	vs := []byte("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: r}\nspec: {host: r}\n")
	anonymous, err := api.NewClient(pl.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var se *api.StatusError
	if _, err := anonymous.Apply(ctx, "", vs); !errors.As(err, &se) || se.Code != 401 {
		t.Errorf("apply without the token: %v, want 401", err)
	}
	again, err := pl.Restart(ctx, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = again.Stop() })
	c, err := again.APIClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, "", vs); err != nil || again.APIToken() != token {
		t.Errorf("apply through APIClient after a restart: %v (token %q, was %q)", err, again.APIToken(), token)
	}

	// On loopback there is none, whatever this process's environment says.
	local, err := proc.StartPilot(ctx, proc.PilotOptions{Command: []string{exe, "pilot"}, DataDir: t.TempDir(),
		LogLevel: "warn", Env: []string{helperEnv + "=pilot"}}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = local.Stop() })
	plain, _ := api.NewClient(local.APIURL(), nil)
	if _, err := plain.Apply(ctx, "", vs); err != nil || local.APIToken() != "" {
		t.Errorf("apply to a loopback pilot without a token: %v (its token %q)", err, local.APIToken())
	}
}

// A pilot started to trust claimed identities (cpload's, bench's) gets
// the flag, and says so in its one warning line.
func TestStartPilotTrustingClaims(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pl, err := proc.StartPilot(context.Background(), proc.PilotOptions{Command: []string{exe, "pilot"}, DataDir: t.TempDir(),
		LogLevel: "warn", Env: []string{helperEnv + "=pilot"}, InsecureTrustClaimedIdentity: true}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pl.Stop() })
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(pl.Tail(), "--insecure-trust-claimed-identity") {
			return fmt.Errorf("no warning in its log: %s", pl.Tail())
		}
		return nil
	})
}
