package store

import (
	"context"
	"errors"
	"time"
)

// CreateSSOUser adds an account whose address the identity provider vouched for: verified
// from the start. ErrConflict when the email is taken.
func (t *Tx) CreateSSOUser(ctx context.Context, u User, verifiedAt time.Time) error {
	_, err := t.exec(ctx, `INSERT INTO users (id, email, password_hash, created_at, email_verified_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.Email, u.PasswordHash, u.CreatedAt.UnixMilli(), verifiedAt.UnixMilli())
	if isUnique(err) {
		return ErrConflict
	}
	return err
}

// EmailVerified tells whether the account has proved it receives mail at its address.
func (t *Tx) EmailVerified(ctx context.Context, userID string) (bool, error) {
	var at int64
	err := t.queryRow(ctx, `SELECT email_verified_at FROM users WHERE id = ?`, userID).Scan(&at)
	return at != 0, err
}

// ClaimBySSO marks an unverified account verified by the identity provider and replaces
// its password (by the hash of one nobody knows): whoever set the old one never proved the
// address was theirs.
func (t *Tx) ClaimBySSO(ctx context.Context, userID, unusableHash string, at time.Time) error {
	return affected(t.exec(ctx, `UPDATE users SET email_verified_at = ?, password_hash = ? WHERE id = ? AND email_verified_at = 0`,
		at.UnixMilli(), unusableHash, userID))
}

// ProjectSSODomains lists the email domains whose people join the project as members when
// they log in by single sign-on, sorted.
func (t *Tx) ProjectSSODomains(ctx context.Context, projectID string) ([]string, error) {
	return t.strings(ctx, `SELECT domain FROM project_sso_domains WHERE project_id = ? ORDER BY domain`, projectID)
}

// SetProjectSSODomains replaces the project's SSO join domains.
func (t *Tx) SetProjectSSODomains(ctx context.Context, projectID string, domains []string) error {
	if _, err := t.exec(ctx, `DELETE FROM project_sso_domains WHERE project_id = ?`, projectID); err != nil {
		return err
	}
	for _, d := range domains {
		if _, err := t.exec(ctx, `INSERT INTO project_sso_domains (project_id, domain) VALUES (?, ?)`, projectID, d); err != nil {
			return err
		}
	}
	return nil
}

// ProjectsJoinedBySSODomain lists the projects a person of the domain joins at an SSO login.
func (t *Tx) ProjectsJoinedBySSODomain(ctx context.Context, domain string) ([]string, error) {
	return t.strings(ctx, `SELECT project_id FROM project_sso_domains WHERE domain = ? ORDER BY project_id`, domain)
}

func (t *Tx) strings(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// SSOSubject is the provider's subject the account was linked to ("" before its first SSO
// login).
func (t *Tx) SSOSubject(ctx context.Context, userID string) (string, error) {
	var sub string
	err := t.queryRow(ctx, `SELECT sso_subject FROM users WHERE id = ?`, userID).Scan(&sub)
	return sub, err
}

// SetSSOSubject links the account to the provider's subject, once: ErrConflict when it is
// linked to another one already.
func (t *Tx) SetSSOSubject(ctx context.Context, userID, subject string) error {
	err := affected(t.exec(ctx, `UPDATE users SET sso_subject = ? WHERE id = ? AND (sso_subject = '' OR sso_subject = ?)`, subject, userID, subject))
	if errors.Is(err, ErrNotFound) {
		return ErrConflict
	}
	return err
}

// SSOJoined tells whether an SSO login once joined the user to the project.
func (t *Tx) SSOJoined(ctx context.Context, projectID, userID string) (bool, error) {
	var n int
	err := t.queryRow(ctx, `SELECT COUNT(*) FROM project_sso_joins WHERE project_id = ? AND user_id = ?`, projectID, userID).Scan(&n)
	return n > 0, err
}

// RecordSSOJoin remembers that an SSO login joined the user to the project.
func (t *Tx) RecordSSOJoin(ctx context.Context, projectID, userID string) error {
	_, err := t.exec(ctx, `INSERT INTO project_sso_joins (project_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING`, projectID, userID)
	return err
}

// ProjectByID returns a project whoever asks: for joins the person is not yet a member of.
func (t *Tx) ProjectByID(ctx context.Context, id string) (Project, error) {
	return scanProject(t.queryRow(ctx, `SELECT `+projectCols+` FROM projects p WHERE p.id = ?`, id))
}
