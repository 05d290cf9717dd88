package store

import (
	"context"
	"strings"
	"time"
)

// AccessToken is a personal access token: a user's credential for scripts and MCP
// clients, stored as its hash.
type AccessToken struct {
	ID, UserID, Name, Prefix, Hash   string
	CreatedAt, ExpiresAt, LastUsedAt time.Time
	// ProjectIDs limits the token to these projects (nil: all of its owner's).
	ProjectIDs []string
	// ReadOnly limits the token to reading: it changes nothing.
	ReadOnly bool
}

// CreateAccessToken stores a token's hash.
func (t *Tx) CreateAccessToken(ctx context.Context, a AccessToken) error {
	_, err := t.exec(ctx, `INSERT INTO access_tokens (id, user_id, name, prefix, hash, created_at, expires_at, project_ids, read_only) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		a.ID, a.UserID, a.Name, a.Prefix, a.Hash, a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli(), strings.Join(a.ProjectIDs, ","), boolInt(a.ReadOnly))
	return err
}

func (t *Tx) accessTokens(ctx context.Context, where string, args ...any) ([]AccessToken, error) {
	rows, err := t.query(ctx, `SELECT id, user_id, name, prefix, hash, created_at, expires_at, last_used_at, project_ids, read_only FROM access_tokens WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []AccessToken
	for rows.Next() {
		var a AccessToken
		var created, expires, used, readOnly int64
		var projects string
		if err := rows.Scan(&a.ID, &a.UserID, &a.Name, &a.Prefix, &a.Hash, &created, &expires, &used, &projects, &readOnly); err != nil {
			return nil, err
		}
		a.CreatedAt, a.ExpiresAt, a.LastUsedAt = ms(created), ms(expires), ms(used)
		a.ProjectIDs, a.ReadOnly = splitList(projects), readOnly != 0
		out = append(out, a)
	}
	return out, rows.Err()
}

// splitList reads a comma-separated column ("" is nil).
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
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

// DeleteAccessTokens removes all of a user's tokens and returns their ids.
func (t *Tx) DeleteAccessTokens(ctx context.Context, userID string) ([]string, error) {
	return t.deleteReturningIDs(ctx, `DELETE FROM access_tokens WHERE user_id = ? RETURNING id`, userID)
}

// SetKeyScopes sets what one of a project's keys may do and returns the key
// (ErrNotFound when the project has no such key).
func (t *Tx) SetKeyScopes(ctx context.Context, projectID, keyID string, scopes []string) (Key, error) {
	if err := affected(t.exec(ctx, `UPDATE api_keys SET scopes = ? WHERE project_id = ? AND id = ?`,
		strings.Join(scopes, ","), projectID, keyID)); err != nil {
		return Key{}, err
	}
	ks, err := t.keys(ctx, "project_id = ? AND id = ?", projectID, keyID)
	if err != nil {
		return Key{}, err
	}
	if len(ks) == 0 {
		return Key{}, ErrNotFound
	}
	return ks[0], nil
}
