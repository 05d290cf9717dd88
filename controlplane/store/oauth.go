package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"
)

// The OAuth authorization server's rows (service/oauth.go has the rules). Codes and
// tokens are stored as their SHA-256 only; a pending request is not a credential (the
// user's own sign-in approves it), so its id is its key.

// OAuthClient is a dynamically registered public client (RFC 7591).
type OAuthClient struct {
	ID, Name              string
	RedirectURIs          []string
	CreatedAt, LastUsedAt time.Time
}

// OAuthRequest is an authorization request waiting for the user's consent.
type OAuthRequest struct {
	ID, ClientID, RedirectURI, CodeChallenge, State, Scope, Resource string
	CreatedAt, ExpiresAt                                             time.Time
}

// OAuthCode is an authorization code, bound to the approving user and the request's
// client, redirect URI, PKCE challenge and resource. GrantID is set when it has been
// exchanged: a second exchange revokes that grant.
type OAuthCode struct {
	Hash, UserID, ClientID, RedirectURI, CodeChallenge, Scope, Resource, GrantID string
	CreatedAt, ExpiresAt                                                         time.Time
}

// OAuthGrant is a user's consent to a client: it owns the access and refresh tokens
// issued under it. ClientName is filled by listings.
type OAuthGrant struct {
	ID, UserID, ClientID, ClientName, Scope, Resource string
	CreatedAt, LastUsedAt                             time.Time
}

// Kinds of OAuthToken.
const (
	OAuthAccess  = "access"
	OAuthRefresh = "refresh"
)

// OAuthToken is an access or refresh token of a grant. A rotated refresh token is kept
// (RotatedAt set) until it expires, so its reuse is recognised and revokes the grant.
type OAuthToken struct {
	Hash, Kind, GrantID             string
	CreatedAt, ExpiresAt, RotatedAt time.Time
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// CreateOAuthClient stores a registered client.
func (t *Tx) CreateOAuthClient(ctx context.Context, c OAuthClient) error {
	uris, err := json.Marshal(c.RedirectURIs)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO oauth_clients (id, name, redirect_uris, created_at) VALUES (?, ?, ?, ?)`,
		c.ID, c.Name, string(uris), c.CreatedAt.UnixMilli())
	return err
}

// OAuthClientByID finds a client (ErrNotFound when there is none).
func (t *Tx) OAuthClientByID(ctx context.Context, id string) (OAuthClient, error) {
	var c OAuthClient
	var uris string
	var created, used int64
	err := t.queryRow(ctx, `SELECT id, name, redirect_uris, created_at, last_used_at FROM oauth_clients WHERE id = ?`, id).
		Scan(&c.ID, &c.Name, &uris, &created, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	if err != nil {
		return c, err
	}
	c.CreatedAt, c.LastUsedAt = ms(created), ms(used)
	return c, json.Unmarshal([]byte(uris), &c.RedirectURIs)
}

// TouchOAuthClient records that a client started an authorization.
func (t *Tx) TouchOAuthClient(ctx context.Context, id string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE oauth_clients SET last_used_at = ? WHERE id = ?`, at.UnixMilli(), id)
	return err
}

// CreateOAuthRequest stores a pending authorization request.
func (t *Tx) CreateOAuthRequest(ctx context.Context, r OAuthRequest) error {
	_, err := t.exec(ctx, `INSERT INTO oauth_requests (id, client_id, redirect_uri, code_challenge, state, scope, resource, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.ClientID, r.RedirectURI, r.CodeChallenge, r.State, r.Scope, r.Resource, r.CreatedAt.UnixMilli(), r.ExpiresAt.UnixMilli())
	return err
}

// OAuthRequestByID finds a pending request, expired or not (ErrNotFound when there is none).
func (t *Tx) OAuthRequestByID(ctx context.Context, id string) (OAuthRequest, error) {
	var r OAuthRequest
	var created, expires int64
	err := t.queryRow(ctx, `SELECT id, client_id, redirect_uri, code_challenge, state, scope, resource, created_at, expires_at
		FROM oauth_requests WHERE id = ?`, id).
		Scan(&r.ID, &r.ClientID, &r.RedirectURI, &r.CodeChallenge, &r.State, &r.Scope, &r.Resource, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	r.CreatedAt, r.ExpiresAt = ms(created), ms(expires)
	return r, err
}

// DeleteOAuthRequest consumes a request (ErrNotFound when it is gone already: a request
// is answered once).
func (t *Tx) DeleteOAuthRequest(ctx context.Context, id string) error {
	return affected(t.exec(ctx, `DELETE FROM oauth_requests WHERE id = ?`, id))
}

// CreateOAuthCode stores an authorization code's hash.
func (t *Tx) CreateOAuthCode(ctx context.Context, c OAuthCode) error {
	_, err := t.exec(ctx, `INSERT INTO oauth_codes (hash, user_id, client_id, redirect_uri, code_challenge, scope, resource, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		c.Hash, c.UserID, c.ClientID, c.RedirectURI, c.CodeChallenge, c.Scope, c.Resource, c.CreatedAt.UnixMilli(), c.ExpiresAt.UnixMilli())
	return err
}

// OAuthCodeByHash finds a code, used or not, expired or not (ErrNotFound when there is none).
func (t *Tx) OAuthCodeByHash(ctx context.Context, hash string) (OAuthCode, error) {
	var c OAuthCode
	var created, expires int64
	err := t.queryRow(ctx, `SELECT hash, user_id, client_id, redirect_uri, code_challenge, scope, resource, grant_id, created_at, expires_at
		FROM oauth_codes WHERE hash = ?`, hash).
		Scan(&c.Hash, &c.UserID, &c.ClientID, &c.RedirectURI, &c.CodeChallenge, &c.Scope, &c.Resource, &c.GrantID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	c.CreatedAt, c.ExpiresAt = ms(created), ms(expires)
	return c, err
}

// UseOAuthCode marks an unused code as exchanged for grantID; ErrNotFound when it was
// used already (by a concurrent exchange too: the row lock decides).
func (t *Tx) UseOAuthCode(ctx context.Context, hash, grantID string) error {
	return affected(t.exec(ctx, `UPDATE oauth_codes SET grant_id = ? WHERE hash = ? AND grant_id = ''`, grantID, hash))
}

// DeleteOAuthCode removes a code.
func (t *Tx) DeleteOAuthCode(ctx context.Context, hash string) error {
	_, err := t.exec(ctx, `DELETE FROM oauth_codes WHERE hash = ?`, hash)
	return err
}

// CreateOAuthGrant stores a grant.
func (t *Tx) CreateOAuthGrant(ctx context.Context, g OAuthGrant) error {
	_, err := t.exec(ctx, `INSERT INTO oauth_grants (id, user_id, client_id, scope, resource, created_at, last_used_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		g.ID, g.UserID, g.ClientID, g.Scope, g.Resource, g.CreatedAt.UnixMilli(), msOrZero(g.LastUsedAt))
	return err
}

func (t *Tx) oauthGrants(ctx context.Context, where string, args ...any) ([]OAuthGrant, error) {
	rows, err := t.query(ctx, `SELECT g.id, g.user_id, g.client_id, c.name, g.scope, g.resource, g.created_at, g.last_used_at
		FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id WHERE `+where+` ORDER BY g.created_at, g.id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []OAuthGrant
	for rows.Next() {
		var g OAuthGrant
		var created, used int64
		if err := rows.Scan(&g.ID, &g.UserID, &g.ClientID, &g.ClientName, &g.Scope, &g.Resource, &created, &used); err != nil {
			return nil, err
		}
		g.CreatedAt, g.LastUsedAt = ms(created), ms(used)
		out = append(out, g)
	}
	return out, rows.Err()
}

// OAuthGrants lists a user's grants with their clients' names.
func (t *Tx) OAuthGrants(ctx context.Context, userID string) ([]OAuthGrant, error) {
	return t.oauthGrants(ctx, "g.user_id = ?", userID)
}

// OAuthGrantByID finds a grant (ErrNotFound when there is none).
func (t *Tx) OAuthGrantByID(ctx context.Context, id string) (OAuthGrant, error) {
	gs, err := t.oauthGrants(ctx, "g.id = ?", id)
	if err != nil {
		return OAuthGrant{}, err
	}
	if len(gs) == 0 {
		return OAuthGrant{}, ErrNotFound
	}
	return gs[0], nil
}

// DeleteOAuthGrant revokes one of a user's grants with its tokens (ErrNotFound when the
// user has no such grant, whoever else might).
func (t *Tx) DeleteOAuthGrant(ctx context.Context, userID, id string) error {
	if _, err := t.exec(ctx, `DELETE FROM oauth_tokens WHERE grant_id IN (SELECT id FROM oauth_grants WHERE user_id = ? AND id = ?)`, userID, id); err != nil {
		return err
	}
	return affected(t.exec(ctx, `DELETE FROM oauth_grants WHERE user_id = ? AND id = ?`, userID, id))
}

// RevokeOAuthGrant deletes a grant and its tokens whoever's it is (a replayed code or
// refresh token); no error when it is gone already.
func (t *Tx) RevokeOAuthGrant(ctx context.Context, id string) error {
	// The tokens go explicitly as well: the cascade needs SQLite's foreign_keys pragma,
	// and a revoked grant's tokens must not outlive it on a connection without it.
	if _, err := t.exec(ctx, `DELETE FROM oauth_tokens WHERE grant_id = ?`, id); err != nil {
		return err
	}
	_, err := t.exec(ctx, `DELETE FROM oauth_grants WHERE id = ?`, id)
	return err
}

// TouchOAuthGrant records a grant's use.
func (t *Tx) TouchOAuthGrant(ctx context.Context, id string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE oauth_grants SET last_used_at = ? WHERE id = ?`, at.UnixMilli(), id)
	return err
}

// CreateOAuthToken stores a token's hash.
func (t *Tx) CreateOAuthToken(ctx context.Context, k OAuthToken) error {
	_, err := t.exec(ctx, `INSERT INTO oauth_tokens (hash, kind, grant_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		k.Hash, k.Kind, k.GrantID, k.CreatedAt.UnixMilli(), k.ExpiresAt.UnixMilli())
	return err
}

// OAuthTokenByHash finds a token, expired or rotated or not (ErrNotFound when there is none).
func (t *Tx) OAuthTokenByHash(ctx context.Context, hash string) (OAuthToken, error) {
	var k OAuthToken
	var created, expires, rotated int64
	err := t.queryRow(ctx, `SELECT hash, kind, grant_id, created_at, expires_at, rotated_at FROM oauth_tokens WHERE hash = ?`, hash).
		Scan(&k.Hash, &k.Kind, &k.GrantID, &created, &expires, &rotated)
	if errors.Is(err, sql.ErrNoRows) {
		return k, ErrNotFound
	}
	k.CreatedAt, k.ExpiresAt, k.RotatedAt = ms(created), ms(expires), ms(rotated)
	return k, err
}

// RotateOAuthToken marks a live refresh token as used; ErrNotFound when it was rotated
// already (by a concurrent refresh too).
func (t *Tx) RotateOAuthToken(ctx context.Context, hash string, at time.Time) error {
	return affected(t.exec(ctx, `UPDATE oauth_tokens SET rotated_at = ? WHERE hash = ? AND rotated_at = 0`, at.UnixMilli(), hash))
}

// DeleteOAuthToken removes one token.
func (t *Tx) DeleteOAuthToken(ctx context.Context, hash string) error {
	_, err := t.exec(ctx, `DELETE FROM oauth_tokens WHERE hash = ?`, hash)
	return err
}

// SetOAuthExpiry moves the expiry of a request, code or token (by id or hash): for
// operators' and tests' use, where waiting out a lifetime is not an option.
func (t *Tx) SetOAuthExpiry(ctx context.Context, key string, at time.Time) error {
	for _, q := range []string{
		`UPDATE oauth_requests SET expires_at = ? WHERE id = ?`,
		`UPDATE oauth_codes SET expires_at = ? WHERE hash = ?`,
		`UPDATE oauth_tokens SET expires_at = ? WHERE hash = ?`,
	} {
		if err := affected(t.exec(ctx, q, at.UnixMilli(), key)); err == nil {
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
	}
	return ErrNotFound
}

// SweepOAuth deletes what has expired by now: pending requests, codes, tokens, grants
// left without a token, and clients unused since idleBefore that hold no grant. It
// returns how many rows went.
func (t *Tx) SweepOAuth(ctx context.Context, now, idleBefore time.Time) (int64, error) {
	n := now.UnixMilli()
	var total int64
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM oauth_requests WHERE expires_at <= ?`, []any{n}},
		{`DELETE FROM oauth_codes WHERE expires_at <= ?`, []any{n}},
		{`DELETE FROM oauth_tokens WHERE expires_at <= ?`, []any{n}},
		// Tokens are written with their grant in one transaction, so a grant without
		// any has had them all expire or revoked.
		{`DELETE FROM oauth_grants WHERE NOT EXISTS (SELECT 1 FROM oauth_tokens k WHERE k.grant_id = oauth_grants.id)`, nil},
		{`DELETE FROM oauth_clients WHERE created_at < ? AND last_used_at < ?
			AND NOT EXISTS (SELECT 1 FROM oauth_grants g WHERE g.client_id = oauth_clients.id)
			AND NOT EXISTS (SELECT 1 FROM oauth_codes c WHERE c.client_id = oauth_clients.id)
			AND NOT EXISTS (SELECT 1 FROM oauth_requests r WHERE r.client_id = oauth_clients.id)`, []any{idleBefore.UnixMilli(), idleBefore.UnixMilli()}},
	} {
		res, err := t.exec(ctx, q.sql, q.args...)
		if err != nil {
			return total, err
		}
		if k, err := res.RowsAffected(); err == nil {
			total += k
		}
	}
	return total, nil
}
