package acmeair

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"

	_ "modernc.org/sqlite" // the SQLite driver every service stores in
)

// store is one service's SQLite database, in its own file under the data
// directory, as each of the reference app's services has its own MongoDB.
type store struct {
	db *sql.DB
}

// openStore opens (creating) DIR/NAME.db in WAL mode, so that readers do not
// wait for the writer, and creates the service's tables.
func openStore(dir, name, schema string) (*store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	path := filepath.Join(dir, name+".db")
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() +
		"?_pragma=busy_timeout(5000)&_pragma=journal_mode(wal)&_pragma=synchronous(normal)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Every user of the driver may be in a call at once; SQLite serialises
	// the writers anyway, so more connections than CPUs only add contention.
	conns := max(4, runtime.GOMAXPROCS(0))
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create the tables of %s: %w", path, err)
	}
	return &store{db: db}, nil
}

// count is how many rows table holds.
func (s *store) count(ctx context.Context, table string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n)
	return n, err
}

// prepare prepares every statement of a service at start, so that a typo
// fails the start and not the first request.
func (s *store) prepare(stmts map[**sql.Stmt]string) error {
	for dst, q := range stmts {
		st, err := s.db.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare %q: %w", q, err)
		}
		*dst = st
	}
	return nil
}

func (s *store) close() error { return s.db.Close() }
