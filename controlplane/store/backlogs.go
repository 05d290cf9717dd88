package store

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Backlog is a user's request to run a project's pipeline over records already stored:
// the range of the raw stream and what the preview announced for it. The
// pipeline role runs it and keeps its progress in NATS (bucket svc-backlogs); the
// database keeps the request, so the mirror's periodic re-publish carries it.
type Backlog struct {
	ID          string
	ProjectID   string
	FirstSeq    uint64
	LastSeq     uint64
	Records     int
	Matched     int
	Calls       int
	RequestedAt time.Time
	RequestedBy string
	// Generation is the mirror's generation (mirror.Store.Generation) when it was asked
	// for: the sequence numbers name records of that NATS only. After a wipe the stream
	// starts again at 1 and the range holds other records, which must not be sent.
	Generation string
	// PrevID is the project's latest backlog when this one was asked for ("" for the
	// first): unique per project, so two requests racing from the same state cannot both
	// start (the second is ErrConflict), in SQLite and PostgreSQL alike.
	PrevID string
}

// CreateBacklog stores a backlog request; ErrConflict when another request was stored
// after the one b names as its predecessor.
func (t *Tx) CreateBacklog(ctx context.Context, b Backlog) error {
	_, err := t.exec(ctx, `INSERT INTO backlogs (id, project_id, prev_id, first_seq, last_seq, records, matched, calls,
		requested_at, requested_by, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		b.ID, b.ProjectID, b.PrevID, int64(b.FirstSeq), int64(b.LastSeq), b.Records, b.Matched, b.Calls,
		b.RequestedAt.UnixMilli(), b.RequestedBy, b.Generation)
	if isUnique(err) {
		return ErrConflict
	}
	return err
}

// latest selects the requests no later request names as its predecessor: one per project.
const latest = `NOT EXISTS (SELECT 1 FROM backlogs n WHERE n.project_id = b.project_id AND n.prev_id = b.id)`

const backlogColumns = `id, project_id, prev_id, first_seq, last_seq, records, matched, calls, requested_at, requested_by, generation`

func scanBacklog(row interface{ Scan(...any) error }) (Backlog, error) {
	var b Backlog
	var first, last, at int64
	err := row.Scan(&b.ID, &b.ProjectID, &b.PrevID, &first, &last, &b.Records, &b.Matched, &b.Calls, &at, &b.RequestedBy, &b.Generation)
	b.FirstSeq, b.LastSeq, b.RequestedAt = uint64(first), uint64(last), ms(at)
	return b, err
}

// LatestBacklog is a project's most recent backlog request; ErrNotFound when it has none.
func (t *Tx) LatestBacklog(ctx context.Context, projectID string) (Backlog, error) {
	b, err := scanBacklog(t.queryRow(ctx, `SELECT `+backlogColumns+` FROM backlogs b WHERE project_id = ? AND `+latest, projectID))
	if errors.Is(err, sql.ErrNoRows) {
		return Backlog{}, ErrNotFound
	}
	return b, err
}

// LatestBacklogs maps each project with a backlog request to its most recent one, for
// the mirror's re-publish.
func (t *Tx) LatestBacklogs(ctx context.Context) (map[string]Backlog, error) {
	rows, err := t.query(ctx, `SELECT `+backlogColumns+` FROM backlogs b WHERE `+latest)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Backlog{}
	for rows.Next() {
		b, err := scanBacklog(rows)
		if err != nil {
			return nil, err
		}
		out[b.ProjectID] = b
	}
	return out, rows.Err()
}
