package store

import (
	"context"
	"time"
)

// NoPassword is the password hash of an account made by single sign-on: no password
// checks against it (it is no argon2id hash), until the person sets one by a reset link.
const NoPassword = "!sso"

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

// ClaimBySSO marks an unverified account verified by the identity provider and makes its
// password unusable: whoever set that password never proved the address was theirs.
func (t *Tx) ClaimBySSO(ctx context.Context, userID string, at time.Time) error {
	return affected(t.exec(ctx, `UPDATE users SET email_verified_at = ?, password_hash = ? WHERE id = ? AND email_verified_at = 0`,
		at.UnixMilli(), NoPassword, userID))
}
