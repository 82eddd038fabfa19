package results

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Location is where a results store lives, as -db names it: a SQLite file
// (a path, or sqlite:PATH) or a PostgreSQL database (a postgres:// or
// postgresql:// URL, as libpq and psql take it).
type Location struct {
	// File is the SQLite database's path; "" for PostgreSQL.
	File string
	// pgConfig is the parsed PostgreSQL URL; nil for SQLite.
	pgConfig *pgx.ConnConfig
	// shown is how messages name the store: the path, or the URL with its
	// password redacted.
	shown string
}

// ErrBadLocation is ParseLocation's error for a -db that names no
// database: a malformed URL, an unknown scheme, an empty path.
var ErrBadLocation = errors.New("bad results database")

// urlScheme matches a URL's scheme, for telling "mysql://..." (refused)
// from a path.
var urlScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*://`)

// ParseLocation decides what a -db value names. It is the one place that
// does: Open and the commands that must not create a missing SQLite file
// both ask it.
func ParseLocation(db string) (Location, error) {
	switch {
	case strings.HasPrefix(db, "postgres://"), strings.HasPrefix(db, "postgresql://"):
		shown := redactURL(db)
		_, uerr := url.Parse(db)
		cfg, err := pgx.ParseConfig(db)
		if err != nil || uerr != nil {
			// pgx's message quotes the URL with its password masked;
			// the cause after it is what the user needs.
			return Location{}, fmt.Errorf("%w: %s: not a PostgreSQL URL (want postgres://user@host:port/database)", ErrBadLocation, shown)
		}
		return Location{pgConfig: cfg, shown: shown}, nil
	case strings.HasPrefix(db, "sqlite:"):
		path := strings.TrimPrefix(db, "sqlite:")
		if path == "" || strings.HasPrefix(path, "//") {
			return Location{}, fmt.Errorf("%w: %s: want sqlite:PATH, e.g. sqlite:results/meshperf.db", ErrBadLocation, db)
		}
		return Location{File: path, shown: path}, nil
	case urlScheme.MatchString(db):
		return Location{}, fmt.Errorf("%w: %s: unknown scheme %s (want a file path, sqlite:PATH, postgres:// or postgresql://)",
			ErrBadLocation, redactURL(db), strings.SplitN(db, ":", 2)[0])
	case db == "":
		return Location{}, fmt.Errorf("%w: empty path", ErrBadLocation)
	}
	return Location{File: db, shown: db}, nil
}

// String names the store for messages: never with its password.
func (l Location) String() string { return l.shown }

// IsFile reports whether the store is a SQLite file (which opening would
// create).
func (l Location) IsFile() bool { return l.pgConfig == nil }

// redactURL is the URL with its password, if any, replaced by xxxxx; a URL
// that does not parse keeps only its scheme, since where its password
// starts cannot be told.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return strings.SplitN(raw, "://", 2)[0] + "://..."
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}
