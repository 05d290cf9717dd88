package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Kinds of EmailToken.
const (
	EmailVerify        = "verify"
	EmailPasswordReset = "reset"
)

// EmailToken is a one-time link mailed to an account: it verifies the address it was sent
// to, or resets the password. Only the secret's hash is stored; the row goes when used.
type EmailToken struct {
	Hash, Kind, UserID, Email string
	CreatedAt, ExpiresAt      time.Time
}

// CreateEmailToken stores a link, replacing the account's earlier links of the same kind:
// only the newest mail works, so an older one found later in a mailbox does nothing.
func (t *Tx) CreateEmailToken(ctx context.Context, e EmailToken) error {
	if _, err := t.exec(ctx, `DELETE FROM email_tokens WHERE user_id = ? AND kind = ?`, e.UserID, e.Kind); err != nil {
		return err
	}
	_, err := t.exec(ctx, `INSERT INTO email_tokens (hash, kind, user_id, email, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		e.Hash, e.Kind, e.UserID, e.Email, e.CreatedAt.UnixMilli(), e.ExpiresAt.UnixMilli())
	return err
}

// TakeEmailToken uses a link once: it is deleted whether or not it has expired, and
// ErrNotFound answers an unknown, used, expired or other-kind one alike.
func (t *Tx) TakeEmailToken(ctx context.Context, kind, hash string, now time.Time) (EmailToken, error) {
	var e EmailToken
	var created, expires int64
	err := t.queryRow(ctx, `SELECT hash, kind, user_id, email, created_at, expires_at FROM email_tokens WHERE hash = ? AND kind = ?`, hash, kind).
		Scan(&e.Hash, &e.Kind, &e.UserID, &e.Email, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	if err != nil {
		return e, err
	}
	// Two requests with the same link: only the one whose delete removed the row wins.
	if err := affected(t.exec(ctx, `DELETE FROM email_tokens WHERE hash = ?`, hash)); err != nil {
		return e, err
	}
	e.CreatedAt, e.ExpiresAt = ms(created), ms(expires)
	if !now.Before(e.ExpiresAt) {
		return e, ErrNotFound
	}
	return e, nil
}

// DeleteEmailTokens drops the account's links of a kind (a password set otherwise makes
// a pending reset link pointless).
func (t *Tx) DeleteEmailTokens(ctx context.Context, userID, kind string) error {
	_, err := t.exec(ctx, `DELETE FROM email_tokens WHERE user_id = ? AND kind = ?`, userID, kind)
	return err
}

// VerifyEmail records that the account receives mail at email, if that is still its
// address (ErrNotFound otherwise).
func (t *Tx) VerifyEmail(ctx context.Context, userID, email string, at time.Time) error {
	return affected(t.exec(ctx, `UPDATE users SET email_verified_at = ? WHERE id = ? AND email = ? AND email_verified_at = 0`,
		at.UnixMilli(), userID, email))
}

// SetPassword replaces an account's password hash.
func (t *Tx) SetPassword(ctx context.Context, userID, hash string) error {
	return affected(t.exec(ctx, `UPDATE users SET password_hash = ? WHERE id = ?`, hash, userID))
}

// SweepEmail deletes expired links and invitations.
func (t *Tx) SweepEmail(ctx context.Context, now time.Time) error {
	if _, err := t.exec(ctx, `DELETE FROM email_tokens WHERE expires_at <= ?`, now.UnixMilli()); err != nil {
		return err
	}
	_, err := t.exec(ctx, `DELETE FROM invitations WHERE expires_at <= ?`, now.UnixMilli())
	return err
}
