package store

import (
	"context"
	"time"
)

// AccessToken is a personal access token: a user's credential for scripts and MCP
// clients, stored as its hash.
type AccessToken struct {
	ID, UserID, Name, Prefix, Hash   string
	CreatedAt, ExpiresAt, LastUsedAt time.Time
}

// CreateAccessToken stores a token's hash.
func (t *Tx) CreateAccessToken(ctx context.Context, a AccessToken) error {
	_, err := t.exec(ctx, `INSERT INTO access_tokens (id, user_id, name, prefix, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.UserID, a.Name, a.Prefix, a.Hash, a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli())
	return err
}

func (t *Tx) accessTokens(ctx context.Context, where string, args ...any) ([]AccessToken, error) {
	rows, err := t.query(ctx, `SELECT id, user_id, name, prefix, hash, created_at, expires_at, last_used_at FROM access_tokens WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AccessToken
	for rows.Next() {
		var a AccessToken
		var created, expires, used int64
		if err := rows.Scan(&a.ID, &a.UserID, &a.Name, &a.Prefix, &a.Hash, &created, &expires, &used); err != nil {
			return nil, err
		}
		a.CreatedAt, a.ExpiresAt, a.LastUsedAt = ms(created), ms(expires), ms(used)
		out = append(out, a)
	}
	return out, rows.Err()
}

// AccessTokens lists a user's tokens.
func (t *Tx) AccessTokens(ctx context.Context, userID string) ([]AccessToken, error) {
	return t.accessTokens(ctx, "user_id = ?", userID)
}

// AccessTokenByHash finds a token by its hash (ErrNotFound when there is none).
func (t *Tx) AccessTokenByHash(ctx context.Context, hash string) (AccessToken, error) {
	as, err := t.accessTokens(ctx, "hash = ?", hash)
	if err != nil {
		return AccessToken{}, err
	}
	if len(as) == 0 {
		return AccessToken{}, ErrNotFound
	}
	return as[0], nil
}

// DeleteAccessToken removes one of a user's tokens (ErrNotFound when the user has no
// such token, whoever else might).
func (t *Tx) DeleteAccessToken(ctx context.Context, userID, id string) error {
	return affected(t.exec(ctx, `DELETE FROM access_tokens WHERE user_id = ? AND id = ?`, userID, id))
}

// TouchAccessToken records a token's use.
func (t *Tx) TouchAccessToken(ctx context.Context, id string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE access_tokens SET last_used_at = ? WHERE id = ?`, at.UnixMilli(), id)
	return err
}
