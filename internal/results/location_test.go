package results

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/meshperf/meshperf/internal/testenv/pgtest"
)

func TestParseLocation(t *testing.T) {
	for _, c := range []struct {
		db, file, shown string
	}{
		{"results/meshperf.db", "results/meshperf.db", "results/meshperf.db"},
		{"sqlite:results/meshperf.db", "results/meshperf.db", "results/meshperf.db"},
		{"sqlite:/abs/m.db", "/abs/m.db", "/abs/m.db"},
		{"postgres://bench:s3cret@db.example:5432/meshperf?sslmode=disable", "", "postgres://bench:xxxxx@db.example:5432/meshperf?sslmode=disable"},
		{"postgresql://bench@db.example/meshperf", "", "postgresql://bench@db.example/meshperf"},
		{"postgres://db.example/meshperf?user=bench&password=s3cret", "", "postgres://db.example/meshperf?password=xxxxx&user=bench"},
	} {
		loc, err := ParseLocation(c.db)
		if err != nil {
			t.Errorf("ParseLocation(%q): %v", c.db, err)
			continue
		}
		if loc.File != c.file || loc.IsFile() != (c.file != "") || loc.String() != c.shown {
			t.Errorf("ParseLocation(%q) = file %q, shown %q; want %q, %q", c.db, loc.File, loc, c.file, c.shown)
		}
	}
}

func TestParseLocationRefusesWhatNamesNoDatabase(t *testing.T) {
	for _, c := range []struct{ db, want string }{
		{"", "empty path"},
		{"sqlite:", "want sqlite:PATH"},
		{"sqlite://x.db", "want sqlite:PATH"},
		{"mysql://u:s3cret@h/db", "unknown scheme mysql"},
		{"postgres://u:s3cret@h:notaport/db", "not a PostgreSQL URL"},
		{"postgres://u:s3cret@h/db?sslmode=sometimes", "not a PostgreSQL URL"},
		{"postgres://u:s3cret@h/db\x7f", "not a PostgreSQL URL"},
	} {
		_, err := ParseLocation(c.db)
		if !errors.Is(err, ErrBadLocation) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseLocation(%q) = %v; want an ErrBadLocation saying %q", c.db, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseLocation(%q): the password is in the message: %v", c.db, err)
		}
		if _, oerr := Open(c.db); !errors.Is(oerr, ErrBadLocation) {
			t.Errorf("Open(%q) = %v, want an ErrBadLocation", c.db, oerr)
		}
	}
}

// A well-formed URL that cannot be opened (nothing listening, a wrong
// password, no such database) is one error naming the store without its
// password, and not an ErrBadLocation: the URL was fine, the server said no.
func TestOpenPostgresFailures(t *testing.T) {
	port := pgtest.Port(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	for _, c := range []struct{ db, want string }{
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/x?sslmode=disable", pgtest.User, pgtest.Password, closed), "connect"},
		{fmt.Sprintf("postgres://%s:wrong-s3cret@127.0.0.1:%d/postgres?sslmode=disable", pgtest.User, port), "password authentication failed"},
		{fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/no_such_db?sslmode=disable", pgtest.User, pgtest.Password, port), `database "no_such_db" does not exist`},
	} {
		_, err := Open(c.db)
		if err == nil || errors.Is(err, ErrBadLocation) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%s) = %v; want a failure saying %q", c.db, err, c.want)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Contains(msg, pgtest.Password) || strings.Contains(msg, "\n") {
			t.Errorf("Open: %q: want one line without the password", msg)
		}
	}
}
