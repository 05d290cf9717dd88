package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ProjectLimitError refuses a project to an account that owns Limit projects already.
type ProjectLimitError struct{ Limit int64 }

func (e *ProjectLimitError) Error() string {
	return fmt.Sprintf("the account owns %d projects, its limit", e.Limit)
}

// CreateOwnedProject is CreateProject within the owner's project limit: the account's own
// (SetProjectLimit) or else def; 0 is no limit. It fails with *ProjectLimitError when the
// account owns that many already.
//
// Two creates of one account must not both see limit-1 and both insert. A no-op update of
// the owner's row first takes that row's lock in PostgreSQL (the second create waits for
// the first to commit, and its count, a new statement under READ COMMITTED, then sees the
// first's project) and SQLite's write lock, which serializes every writer.
func (t *Tx) CreateOwnedProject(ctx context.Context, p Project, def int64) error {
	if err := affected(t.exec(ctx, `UPDATE users SET max_projects = max_projects WHERE id = ?`, p.OwnerID)); err != nil {
		return err
	}
	limit, _, err := t.ProjectLimit(ctx, p.OwnerID, def)
	if err != nil {
		return err
	}
	if limit > 0 {
		n, err := t.OwnedProjects(ctx, p.OwnerID)
		if err != nil {
			return err
		}
		if n >= limit {
			return &ProjectLimitError{Limit: limit}
		}
	}
	return t.CreateProject(ctx, p)
}

// ProjectLimit is how many projects the account may own: its own limit (own true) or def.
func (t *Tx) ProjectLimit(ctx context.Context, userID string, def int64) (limit int64, own bool, err error) {
	var n sql.NullInt64
	err = t.queryRow(ctx, `SELECT max_projects FROM users WHERE id = ?`, userID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, ErrNotFound
	}
	if err != nil {
		return 0, false, err
	}
	if n.Valid {
		return n.Int64, true, nil
	}
	return def, false, nil
}

// SetProjectLimit gives the account its own project limit (0: none); nil returns it to
// the deployment's default.
func (t *Tx) SetProjectLimit(ctx context.Context, userID string, limit *int64) error {
	var v any
	if limit != nil {
		v = *limit
	}
	return affected(t.exec(ctx, `UPDATE users SET max_projects = ? WHERE id = ?`, v, userID))
}

// OwnedProjects counts the projects the account owns.
func (t *Tx) OwnedProjects(ctx context.Context, userID string) (int64, error) {
	var n int64
	err := t.queryRow(ctx, `SELECT COUNT(*) FROM projects WHERE owner_id = ?`, userID).Scan(&n)
	return n, err
}
