// Package pgtest gives tests a real PostgreSQL server of their own: a
// cluster initdb'd in a temporary directory, listening on a free loopback
// port (and a unix socket in that directory), with a fresh database per
// test. initdb takes seconds, so a test binary starts one cluster, on first
// use, and stops it when its tests end (Main, from TestMain); each test's
// database is dropped in its t.Cleanup.
//
// The server is Debian's postgresql package (initdb and postgres under
// /usr/lib/postgresql/VERSION/bin, found by internal/syscmd); without it
// the test is skipped through internal/testenv. As root, the server runs as
// the postgres user, since PostgreSQL refuses to run as root.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	osuser "os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to create databases

	"github.com/meshperf/meshperf/internal/proc"
	"github.com/meshperf/meshperf/internal/testenv"
	"github.com/meshperf/meshperf/internal/testutil"
)

// User and Password are the cluster's superuser; tests connect as it over
// TCP with a password (scram-sha-256), as a team's meshperf would.
const (
	User     = "meshperf"
	Password = "pgtest-secret-7c1e"
)

// Server is a running cluster.
type Server struct {
	dir  string // temporary: data directory, socket, log
	port int
	proc *proc.Process
	next atomic.Int64 // databases created, for their names
}

var (
	mu       sync.Mutex
	shared   *Server
	startErr error
	inMain   bool
)

// Main runs a package's tests and then stops the cluster they shared. A
// package that uses pgtest calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
func Main(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if shared != nil {
		shared.stop()
		shared = nil
	}
	return code
}

// NewDatabase creates an empty database on the test binary's cluster
// (starting it on first use) and returns its URL, with the password; the
// database is dropped when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	s := server(t)
	name := fmt.Sprintf("t%d_%s", s.next.Add(1), strings.ToLower(sanitize(t.Name())))
	if len(name) > 60 {
		name = name[:60]
	}
	admin := s.open(t, "postgres")
	if _, err := admin.Exec(`CREATE DATABASE "` + name + `"`); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		// WITH (FORCE) ends connections a failed test left open.
		if _, err := admin.Exec(`DROP DATABASE IF EXISTS "` + name + `" WITH (FORCE)`); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	return s.URL(name)
}

// URL is the URL of database db on the test binary's cluster as User,
// with Password.
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(User, Password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the cluster's loopback port, for a test that writes its own URL
// (a wrong password, a missing database).
func Port(t testing.TB) int { return server(t).port }

func (s *Server) open(t testing.TB, db string) *sql.DB {
	t.Helper()
	conn, err := sql.Open("pgx", s.URL(db))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return conn
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, name)
}

// server is the shared cluster, started on first use; a start that failed
// fails every test that asks again, without retrying initdb.
func server(t testing.TB) *Server {
	t.Helper()
	initdb := testenv.NeedCommand(t, "initdb", "postgresql")
	postgres := testenv.NeedCommand(t, "postgres", "postgresql")
	mu.Lock()
	defer mu.Unlock()
	if !inMain {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main, which stops the cluster after the tests")
	}
	if shared == nil && startErr == nil {
		shared, startErr = start(initdb, postgres)
	}
	if startErr != nil {
		t.Fatalf("pgtest: %v", startErr)
	}
	return shared
}

// start initdb's a cluster in a new temporary directory and starts it.
func start(initdb, postgres string) (*Server, error) {
	user, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "meshperf-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if user != nil {
		if err := os.Chown(dir, int(user.UID), int(user.GID)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(Password+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if user != nil {
		_ = os.Chown(pwfile, int(user.UID), int(user.GID))
	}
	// -N: a test cluster needs no fsync. Local (socket) connections are
	// trusted; TCP ones need the password, so tests meet authentication.
	cmd := exec.Command(initdb, "-N", "-D", s.data(), "-U", User, "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C")
	if user != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: user.UID, Gid: user.GID}}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// A free port can be taken between asking and binding: try another.
	for attempt := 0; ; attempt++ {
		if err = s.run(postgres, user); err == nil || attempt == 2 {
			break
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// serverUser is the user the server runs as: postgres when the tests run
// as root (nil: the current user otherwise).
func serverUser() (*proc.User, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := osuser.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, the server needs the postgres user (the postgresql package creates it): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &proc.User{UID: uint32(uid), GID: uint32(gid)}, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

// run starts postgres on a free port and waits until it answers.
func (s *Server) run(postgres string, user *proc.User) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s.proc, err = proc.Start(proc.Spec{
		Name: "postgres", Path: postgres, User: user, LogPath: filepath.Join(s.dir, "postgres.log"),
		Args: []string{"-D", s.data(), "-p", strconv.Itoa(s.port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + s.dir, "-c", "fsync=off"},
		// SIGQUIT is PostgreSQL's immediate shutdown: should the test
		// binary die without Main's stop, the server goes with it.
		ParentDeathSignal: syscall.SIGQUIT,
		// SIGTERM is its smart shutdown; the grace bounds it.
		StopGrace: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	err = testutil.Poll(30*time.Second, func() error {
		if s.proc.Exited() {
			return nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx)
	})
	if s.proc.Exited() {
		return fmt.Errorf("postgres on port %d %s", s.port, s.proc.ExitReason())
	}
	if err != nil {
		_ = s.proc.Kill()
		return fmt.Errorf("postgres on port %d: %w", s.port, err)
	}
	return nil
}

// stop shuts the server down (SIGINT: fast shutdown, then SIGKILL after
// its grace) and removes its directory.
func (s *Server) stop() {
	if err := s.proc.Signal(syscall.SIGINT); err == nil {
		select {
		case <-s.proc.Done():
		case <-time.After(30 * time.Second):
		}
	}
	_ = s.proc.Stop()
	if err := os.RemoveAll(s.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(os.Stderr, "pgtest: remove %s: %v\n", s.dir, err)
	}
}
