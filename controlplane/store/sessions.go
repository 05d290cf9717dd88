package store

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"
)

// Session is a dashboard login. The browser holds its secret in a cookie; only the
// secret's hash is stored, and every request looks it up, so deleting the row ends the
// session at once.
type Session struct {
	ID, UserID, Hash                 string
	CreatedAt, ExpiresAt, LastSeenAt time.Time
}

// CreateSession stores a session.
func (t *Tx) CreateSession(ctx context.Context, s Session) error {
	_, err := t.exec(ctx, `INSERT INTO sessions (id, user_id, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		s.ID, s.UserID, s.Hash, s.CreatedAt.UnixMilli(), s.ExpiresAt.UnixMilli())
	return err
}

// SessionByHash finds a session by its secret's hash, expired or not (ErrNotFound when
// there is none): the cookie carries the secret, never the id.
func (t *Tx) SessionByHash(ctx context.Context, hash string) (Session, error) {
	var s Session
	var created, expires, seen int64
	err := t.queryRow(ctx, `SELECT id, user_id, hash, created_at, expires_at, last_seen_at FROM sessions WHERE hash = ?`, hash).
		Scan(&s.ID, &s.UserID, &s.Hash, &created, &expires, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return s, ErrNotFound
	}
	if err != nil {
		return s, err
	}
	s.CreatedAt, s.ExpiresAt, s.LastSeenAt = ms(created), ms(expires), ms(seen)
	return s, nil
}

// DeleteSession ends a session (ErrNotFound when it had already ended).
func (t *Tx) DeleteSession(ctx context.Context, id string) error {
	return affected(t.exec(ctx, `DELETE FROM sessions WHERE id = ?`, id))
}

// TouchSession records that a session was used.
func (t *Tx) TouchSession(ctx context.Context, id string, at time.Time) error {
	_, err := t.exec(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ?`, at.UnixMilli(), id)
	return err
}

// PruneSessions deletes the user's sessions that expired by now and, of the rest, all but
// the newest keep: called before a login adds one, with keep one less than the bound. It
// returns the ids of the live sessions it ended, whose console tokens must end too.
func (t *Tx) PruneSessions(ctx context.Context, userID string, now time.Time, keep int) ([]string, error) {
	if _, err := t.exec(ctx, `DELETE FROM sessions WHERE user_id = ? AND expires_at <= ?`, userID, now.UnixMilli()); err != nil {
		return nil, err
	}
	rows, err := t.query(ctx, `SELECT id FROM sessions WHERE user_id = ? AND id NOT IN (
		SELECT id FROM sessions WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?)`, userID, userID, keep)
	if err != nil {
		return nil, err
	}
	var ended []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ended = append(ended, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, id := range ended {
		if _, err := t.exec(ctx, `DELETE FROM sessions WHERE id = ?`, id); err != nil {
			return nil, err
		}
	}
	return ended, nil
}

// DeleteSessions ends all of a user's sessions and returns their ids.
func (t *Tx) DeleteSessions(ctx context.Context, userID string) ([]string, error) {
	return t.deleteReturningIDs(ctx, `DELETE FROM sessions WHERE user_id = ? RETURNING id`, userID)
}

// deleteReturningIDs runs a DELETE … RETURNING id and returns the ids it deleted. One
// statement, not a SELECT then a DELETE: under Postgres's READ COMMITTED a row committed
// between the two would be deleted without its id being returned, so never revoked.
func (t *Tx) deleteReturningIDs(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := t.query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// LockUser holds the user's row to the end of the transaction and returns their login
// generation. Logging out everywhere raises the generation first, so a transaction making
// something for a credential that locks the row too runs wholly before or after it, and
// after, sees it (Postgres's READ COMMITTED reads the locked row as committed).
func (t *Tx) LockUser(ctx context.Context, userID string) (int64, error) {
	if err := affected(t.exec(ctx, `UPDATE users SET login_generation = login_generation WHERE id = ?`, userID)); err != nil {
		return 0, err
	}
	return t.LoginGeneration(ctx, userID)
}

// HoldsCredential reports whether the user still has the session, personal access token
// or OAuth grant named id (their ids differ by kind prefix, so one id is in one table).
func (t *Tx) HoldsCredential(ctx context.Context, userID, id string) (bool, error) {
	var one int
	err := t.queryRow(ctx, `SELECT 1 FROM sessions WHERE user_id = ? AND id = ?
		UNION ALL SELECT 1 FROM access_tokens WHERE user_id = ? AND id = ?
		UNION ALL SELECT 1 FROM oauth_grants WHERE user_id = ? AND id = ?`, userID, id, userID, id, userID, id).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	return err == nil, err
}

// LoginGeneration is the user's login generation: login tokens name the one they were
// issued under and count only while it is the user's (ErrNotFound: no such user).
func (t *Tx) LoginGeneration(ctx context.Context, userID string) (int64, error) {
	var g int64
	err := t.queryRow(ctx, `SELECT login_generation FROM users WHERE id = ?`, userID).Scan(&g)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrNotFound
	}
	return g, err
}

// NextLoginGeneration raises the user's login generation, which ends every login token
// issued before, and returns the generation it ended.
func (t *Tx) NextLoginGeneration(ctx context.Context, userID string) (ended int64, err error) {
	// Raised first, then read: the update holds the row, so of two at once the second
	// ends the generation the first began, not the one both read before.
	if err = affected(t.exec(ctx, `UPDATE users SET login_generation = login_generation + 1 WHERE id = ?`, userID)); err != nil {
		return 0, err
	}
	now, err := t.LoginGeneration(ctx, userID)
	return now - 1, err
}

// DeleteOAuthCodes removes the user's authorization codes not yet exchanged, so none
// becomes a grant after the user's credentials were all ended.
func (t *Tx) DeleteOAuthCodes(ctx context.Context, userID string) error {
	_, err := t.exec(ctx, `DELETE FROM oauth_codes WHERE user_id = ?`, userID)
	return err
}
