// Package store is the control plane's database: SQLite under the data directory by
// default, PostgreSQL when DATABASE_URL is set. Both run the same migrations and queries.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers "pgx"
	_ "modernc.org/sqlite"             // registers "sqlite"
)

// Errors the API maps to answers.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Store is the database.
type Store struct {
	db       *sql.DB
	postgres bool
}

// Open connects (SQLite file under dataDir when databaseURL is empty) and migrates.
func Open(ctx context.Context, dataDir, databaseURL string) (*Store, error) {
	return open(ctx, dataDir, databaseURL, migrations)
}

// open applies the migrations in upTo (a prefix of migrations: tests start from an older
// schema to check what a later migration does to its rows).
func open(ctx context.Context, dataDir, databaseURL string, upTo []string) (*Store, error) {
	var s Store
	var err error
	if databaseURL != "" {
		s.postgres = true
		s.db, err = sql.Open("pgx", databaseURL)
	} else {
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, err
		}
		path := filepath.Join(dataDir, "controlplane.db")
		s.db, err = sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)")
		// One writer at a time is SQLite's model; a single connection also means a
		// transaction never waits on another connection's lock.
		s.db.SetMaxOpenConns(1)
	}
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.db.PingContext(pctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := s.migrate(ctx, upTo); err != nil {
		s.db.Close()
		return nil, err
	}
	return &s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Ping checks the database, for /healthz.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Kind names the database for logs.
func (s *Store) Kind() string {
	if s.postgres {
		return "postgresql"
	}
	return "sqlite"
}

func (s *Store) migrate(ctx context.Context, upTo []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck
	if s.postgres {
		// Control planes starting together must not migrate twice.
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(727274)`); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("migrations table: %w", err)
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	for i := current; i < len(upTo); i++ {
		for _, stmt := range strings.Split(upTo[i], ";") {
			if strings.TrimSpace(stmt) == "" {
				continue
			}
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("migration %d: %w", i+1, err)
			}
		}
		if _, err := tx.ExecContext(ctx, s.rebind(`INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`), i+1, now()); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// rebind turns ? placeholders into PostgreSQL's $1, $2, ...
func (s *Store) rebind(q string) string {
	if !s.postgres {
		return q
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

func now() int64 { return time.Now().UnixMilli() }

// isUnique reports a unique-constraint violation in either database.
func isUnique(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "UNIQUE constraint failed") || strings.Contains(msg, "SQLSTATE 23505") || strings.Contains(msg, "duplicate key")
}

// Tx is a transaction; the API applies a change in one, writes the configuration mirror,
// and commits only when the mirror took it.
type Tx struct {
	tx *sql.Tx
	s  *Store
	// wrote is set by the first statement that may change a row: the audit record of
	// the change the context carries goes with it (writePendingAudit).
	wrote bool
}

// InTx runs fn in a transaction, committed when fn returns nil.
func (s *Store) InTx(ctx context.Context, fn func(*Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	t := &Tx{tx: tx, s: s}
	err = fn(t)
	if err == nil {
		err = t.writePendingAudit(ctx)
	}
	if err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

func (t *Tx) exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	t.wrote = true
	return t.tx.ExecContext(ctx, t.s.rebind(q), args...)
}

func (t *Tx) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.s.rebind(q), args...)
}

func (t *Tx) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.s.rebind(q), args...)
}

// affected turns "no row changed" into ErrNotFound.
func affected(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// Setting reads a setting ("" when unset).
func (t *Tx) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := t.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return v, err
}

// SetSettingOnce stores a setting unless one exists, and returns the stored value: two
// control planes starting together agree on one value.
func (t *Tx) SetSettingOnce(ctx context.Context, name, value string) (string, error) {
	if _, err := t.exec(ctx, `INSERT INTO settings (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, value); err != nil {
		return "", err
	}
	return t.Setting(ctx, name)
}

// Present returns which of vals are in table's column col, and holds each found row
// (PostgreSQL: FOR SHARE; SQLite runs one transaction at a time) until the transaction
// ends. The mirror's re-publish writes an entry only while its row is held this way: a
// delete, which removes the row before the entry, then either waits for the write and
// removes the entry after it, or commits first and the row is not found. Without the
// hold a key revoked during a re-publish came back until the next one.
func (t *Tx) Present(ctx context.Context, table, col string, vals []string) (map[string]bool, error) {
	out := make(map[string]bool, len(vals))
	if len(vals) == 0 {
		return out, nil
	}
	switch table + "." + col { // identifiers cannot be bound; only these are asked for
	case "api_keys.hash", "sources.ingest_key", "projects.id":
	default:
		return nil, fmt.Errorf("store: Present on %s.%s", table, col)
	}
	q := `SELECT ` + col + ` FROM ` + table + ` WHERE ` + col + ` IN (?` + strings.Repeat(`, ?`, len(vals)-1) + `)`
	if t.s.postgres {
		q += ` FOR SHARE`
	}
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out[v] = true
	}
	return out, rows.Err()
}
