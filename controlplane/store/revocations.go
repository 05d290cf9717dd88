package store

import (
	"context"
	"time"
)

// Revocation is a revoked credential (a personal access token's, a dashboard session's or
// an OAuth grant's id) that console tokens may still name. Receivers must know it (the
// mirror's svc-revocations bucket) until ExpiresAt, by when every such token has expired.
// It is kept here, not only sent: a revocation NATS could not take when it was made would
// otherwise live only in the memory of the control plane that made it.
type Revocation struct {
	CredentialID         string
	RevokedAt, ExpiresAt time.Time
}

// AddRevocations records revoked credentials, in the transaction that revokes them, so
// that a committed revocation is never without its record. Revoking an id again keeps its
// first time, the later expiry, and marks it to be published again.
func (t *Tx) AddRevocations(ctx context.Context, at, expires time.Time, ids ...string) error {
	for _, id := range ids {
		if _, err := t.exec(ctx, `INSERT INTO revocations (credential_id, revoked_at, expires_at) VALUES (?, ?, ?)
			ON CONFLICT (credential_id) DO UPDATE SET published_at = 0,
				expires_at = CASE WHEN excluded.expires_at > revocations.expires_at THEN excluded.expires_at ELSE revocations.expires_at END`,
			id, at.UnixMilli(), expires.UnixMilli()); err != nil {
			return err
		}
	}
	return nil
}

// Revocations lists the revocations in force at now, oldest first; pendingOnly lists only
// those not yet published since they were (last) recorded.
func (t *Tx) Revocations(ctx context.Context, now time.Time, pendingOnly bool) ([]Revocation, error) {
	q := `SELECT credential_id, revoked_at, expires_at FROM revocations WHERE expires_at > ?`
	if pendingOnly {
		q += ` AND published_at = 0`
	}
	rows, err := t.query(ctx, q+` ORDER BY revoked_at, credential_id`, now.UnixMilli())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Revocation
	for rows.Next() {
		var r Revocation
		var at, exp int64
		if err := rows.Scan(&r.CredentialID, &at, &exp); err != nil {
			return nil, err
		}
		r.RevokedAt, r.ExpiresAt = ms(at), ms(exp)
		out = append(out, r)
	}
	return out, rows.Err()
}

// RevocationsPublished records that the mirror has these revocations.
func (t *Tx) RevocationsPublished(ctx context.Context, at time.Time, ids ...string) error {
	for _, id := range ids {
		if _, err := t.exec(ctx, `UPDATE revocations SET published_at = ? WHERE credential_id = ?`, at.UnixMilli(), id); err != nil {
			return err
		}
	}
	return nil
}

// SweepRevocations deletes the revocations expired by now; unpublished is how many of
// them never reached the mirror (their console tokens lived until they expired).
func (t *Tx) SweepRevocations(ctx context.Context, now time.Time) (deleted, unpublished int64, err error) {
	if err = t.queryRow(ctx, `SELECT COUNT(*) FROM revocations WHERE expires_at <= ? AND published_at = 0`, now.UnixMilli()).Scan(&unpublished); err != nil {
		return 0, 0, err
	}
	res, err := t.exec(ctx, `DELETE FROM revocations WHERE expires_at <= ?`, now.UnixMilli())
	if err != nil {
		return 0, 0, err
	}
	deleted, err = res.RowsAffected()
	return deleted, unpublished, err
}
