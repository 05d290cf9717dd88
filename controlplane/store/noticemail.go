package store

import (
	"context"
	"time"
)

// ClaimNoticeMail records that the mail of notice (a notice's key with its recipient) is
// being sent: true when this call inserted it, false when some control plane already
// had. The insert is the only decider shared by replicas watching the same buckets.
func (t *Tx) ClaimNoticeMail(ctx context.Context, notice string, at time.Time) (bool, error) {
	res, err := t.exec(ctx, `INSERT INTO notice_mails (notice, sent_at) VALUES (?, ?) ON CONFLICT DO NOTHING`, notice, at.UnixMilli())
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// ReleaseNoticeMail gives a claim back after its mail failed, so a later update of the
// notice (or a restart) may try again.
func (t *Tx) ReleaseNoticeMail(ctx context.Context, notice string) error {
	_, err := t.exec(ctx, `DELETE FROM notice_mails WHERE notice = ?`, notice)
	return err
}

// SweepNoticeMails forgets claims older than before: the buckets' entries they dedupe
// have expired by then.
func (t *Tx) SweepNoticeMails(ctx context.Context, before time.Time) error {
	_, err := t.exec(ctx, `DELETE FROM notice_mails WHERE sent_at < ?`, before.UnixMilli())
	return err
}

// NoticeRecipient is who is told of a project's failures.
type NoticeRecipient struct{ UserID, Email string }

// FailureNoticeRecipients are the project's owners and admins with a verified address:
// members are not mailed, and an unverified address may not be theirs.
func (t *Tx) FailureNoticeRecipients(ctx context.Context, projectID string) ([]NoticeRecipient, error) {
	rows, err := t.query(ctx, `SELECT u.id, u.email FROM members m JOIN users u ON u.id = m.user_id
		WHERE m.project_id = ? AND m.role IN (?, ?) AND u.email_verified_at > 0 ORDER BY u.email`, projectID, RoleOwner, RoleAdmin)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []NoticeRecipient
	for rows.Next() {
		var r NoticeRecipient
		if err := rows.Scan(&r.UserID, &r.Email); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
