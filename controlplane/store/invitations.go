package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Invitation is a pending membership for an email address that has no verified account:
// the mailed link (its secret stored hashed) signs the address up, or logs it in, into
// the project with Role, once, before ExpiresAt.
type Invitation struct {
	ID, ProjectID, Email, Role, Hash, InvitedBy string
	CreatedAt, ExpiresAt                        time.Time
	// InvitedByEmail is the inviter's address when a listing looked it up (not stored:
	// an account's address can change).
	InvitedByEmail string
}

const invitationCols = `id, project_id, email, role, hash, invited_by, created_at, expires_at`

func scanInvitation(sc interface{ Scan(...any) error }) (Invitation, error) {
	var i Invitation
	var created, expires int64
	err := sc.Scan(&i.ID, &i.ProjectID, &i.Email, &i.Role, &i.Hash, &i.InvitedBy, &created, &expires)
	i.CreatedAt, i.ExpiresAt = ms(created), ms(expires)
	return i, err
}

// PutInvitation stores an invitation, replacing the project's earlier one for the same
// address (whose link then stops working).
func (t *Tx) PutInvitation(ctx context.Context, i Invitation) error {
	if _, err := t.exec(ctx, `DELETE FROM invitations WHERE project_id = ? AND email = ?`, i.ProjectID, i.Email); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO invitations (`+invitationCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		i.ID, i.ProjectID, i.Email, i.Role, i.Hash, i.InvitedBy, i.CreatedAt.UnixMilli(), i.ExpiresAt.UnixMilli())
	return err
}

// Invitations lists a project's invitations that have not expired, newest first.
func (t *Tx) Invitations(ctx context.Context, projectID string, now time.Time) ([]Invitation, error) {
	rows, err := t.query(ctx, `SELECT `+invitationCols+` FROM invitations WHERE project_id = ? AND expires_at > ? ORDER BY created_at DESC, id`,
		projectID, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Invitation
	for rows.Next() {
		i, err := scanInvitation(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, i)
	}
	return out, rows.Err()
}

// DeleteInvitation revokes an invitation of the project (ErrNotFound when there is none).
func (t *Tx) DeleteInvitation(ctx context.Context, projectID, id string) error {
	return affected(t.exec(ctx, `DELETE FROM invitations WHERE project_id = ? AND id = ?`, projectID, id))
}

// InvitationByHash finds a live invitation by its secret's hash (ErrNotFound when
// unknown, used, revoked or expired).
func (t *Tx) InvitationByHash(ctx context.Context, hash string, now time.Time) (Invitation, error) {
	i, err := scanInvitation(t.queryRow(ctx, `SELECT `+invitationCols+` FROM invitations WHERE hash = ? AND expires_at > ?`, hash, now.UnixMilli()))
	if errors.Is(err, sql.ErrNoRows) {
		return i, ErrNotFound
	}
	return i, err
}

// TakeInvitation uses an invitation once (ErrNotFound when another request took it first).
func (t *Tx) TakeInvitation(ctx context.Context, id string) error {
	return affected(t.exec(ctx, `DELETE FROM invitations WHERE id = ?`, id))
}

// InvitedProject is the project of an invitation, read without a membership (the
// invited have none yet).
func (t *Tx) InvitedProject(ctx context.Context, id string) (Project, error) {
	return scanProject(t.queryRow(ctx, `SELECT `+projectCols+` FROM projects p WHERE p.id = ?`, id))
}
