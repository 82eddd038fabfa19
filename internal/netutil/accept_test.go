package netutil

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// emfileChildEnv makes the test binary, run again by
// TestAcceptAtOpenFilesLimitIsCounted, exhaust its own open files: the limit
// is the whole process's, so the parent's other tests must not share it.
const emfileChildEnv = "MESHPERF_NETUTIL_EMFILE_CHILD"

func TestAcceptAtOpenFilesLimitIsCounted(t *testing.T) {
	if os.Getenv(emfileChildEnv) == "1" {
		acceptAtOpenFilesLimit(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAcceptAtOpenFilesLimitIsCounted$", "-test.v")
	cmd.Env = append(os.Environ(), emfileChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestAcceptAtOpenFilesLimitIsCounted") {
		t.Fatalf("child did not run the check:\n%s", out)
	}
}

// acceptAtOpenFilesLimit connects to a wrapped listener, uses up every file
// the process may open, and accepts: the accept fails with EMFILE, which
// must be counted under its reason, logged with the advice, and returned.
func acceptAtOpenFilesLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	var logged bytes.Buffer
	errs, err := NewAcceptErrors(reg, "test_accept_errors_total", "test", slog.New(slog.NewTextHandler(&logged, nil)), "raise the limit")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := errs.Wrap(raw)
	defer ln.Close()
	// The handshake completes in the kernel's backlog: the connection waits
	// for an accept that has no file left to give it.
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	lowered := lim
	lowered.Cur = 64
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("filling the open files: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	_, acceptErr := ln.Accept()
	for _, f := range held {
		f.Close()
	}
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)

	if !errors.Is(acceptErr, syscall.EMFILE) {
		t.Fatalf("Accept at the limit returned %v, want EMFILE returned to the server", acceptErr)
	}
	if got := testutil.ToFloat64(errs.counter.WithLabelValues(ReasonTooManyOpenFiles)); got != 1 {
		t.Errorf("too_many_open_files = %v, want 1", got)
	}
	if got := testutil.ToFloat64(errs.counter.WithLabelValues(ReasonOther)); got != 0 {
		t.Errorf("other = %v, want 0", got)
	}
	if line := logged.String(); !strings.Contains(line, "reason=too_many_open_files") || !strings.Contains(line, "raise the limit") {
		t.Errorf("log = %q, want the reason and the advice", line)
	}
	// Once the files are back, the waiting connection is accepted.
	conn, err := ln.Accept()
	if err != nil {
		t.Fatalf("Accept after the files were freed: %v", err)
	}
	conn.Close()
}

func TestAcceptReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.EMFILE)}, ReasonTooManyOpenFiles},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ENFILE)}, ReasonTooManyOpenFiles},
		{&net.OpError{Op: "accept", Err: os.NewSyscallError("accept4", syscall.ECONNABORTED)}, ReasonOther},
	} {
		if got := AcceptReason(c.err); got != c.want {
			t.Errorf("AcceptReason(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestClosedListenerIsNotCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	errs, err := NewAcceptErrors(reg, "test_accept_errors_total", "test", slog.New(slog.DiscardHandler), "")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := errs.Wrap(raw)
	ln.Close()
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept on a closed listener = %v, want net.ErrClosed", err)
	}
	if got := testutil.CollectAndCount(errs.counter); got != 2 {
		t.Fatalf("series = %d, want the two reasons", got)
	}
	if got := testutil.ToFloat64(errs.counter.WithLabelValues(ReasonOther)) + testutil.ToFloat64(errs.counter.WithLabelValues(ReasonTooManyOpenFiles)); got != 0 {
		t.Errorf("a server stopping counted %v accept errors, want 0", got)
	}
}
