package store

import (
	"context"
	"encoding/json"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Source is a push source: its ingest key (part of its URL) and its configuration.
type Source struct {
	ID        string
	ProjectID string
	IngestKey string
	// Config is what the data plane gets; Config.ID, ProjectID and Name repeat the columns.
	Config    mirror.Source
	CreatedAt time.Time
}

// CreateSource stores a source; ErrConflict when the project has one of that name.
func (t *Tx) CreateSource(ctx context.Context, s Source) error {
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO sources (id, project_id, name, ingest_key, config, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		s.ID, s.ProjectID, s.Config.Name, s.IngestKey, string(cfg), s.CreatedAt.UnixMilli())
	if isUnique(err) {
		return ErrConflict
	}
	return err
}

func (t *Tx) sources(ctx context.Context, where string, args ...any) ([]Source, error) {
	rows, err := t.query(ctx, `SELECT id, project_id, ingest_key, config, created_at FROM sources WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Source
	for rows.Next() {
		var s Source
		var cfg string
		var created int64
		if err := rows.Scan(&s.ID, &s.ProjectID, &s.IngestKey, &cfg, &created); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(cfg), &s.Config); err != nil {
			return nil, err
		}
		s.CreatedAt = ms(created)
		out = append(out, s)
	}
	return out, rows.Err()
}

// Sources lists a project's sources, oldest first.
func (t *Tx) Sources(ctx context.Context, projectID string) ([]Source, error) {
	return t.sources(ctx, "project_id = ?", projectID)
}

// AllSources lists every source, for re-publishing the mirror.
func (t *Tx) AllSources(ctx context.Context) ([]Source, error) { return t.sources(ctx, "1 = 1") }

// SourceByID returns one source of a project.
func (t *Tx) SourceByID(ctx context.Context, projectID, id string) (Source, error) {
	ss, err := t.sources(ctx, "project_id = ? AND id = ?", projectID, id)
	if err != nil {
		return Source{}, err
	}
	if len(ss) == 0 {
		return Source{}, ErrNotFound
	}
	return ss[0], nil
}

// DeleteSource removes a source with its ingest-scoped keys and returns them, so the
// caller can withdraw both from the mirror.
func (t *Tx) DeleteSource(ctx context.Context, projectID, id string) (Source, []Key, error) {
	s, err := t.SourceByID(ctx, projectID, id)
	if err != nil {
		return Source{}, nil, err
	}
	keys, err := t.keys(ctx, "project_id = ? AND source_id = ?", projectID, id)
	if err != nil {
		return Source{}, nil, err
	}
	if _, err := t.exec(ctx, `DELETE FROM api_keys WHERE project_id = ? AND source_id = ?`, projectID, id); err != nil {
		return Source{}, nil, err
	}
	return s, keys, affected(t.exec(ctx, `DELETE FROM sources WHERE id = ?`, id))
}

// UpdateSourceConfig replaces a source's configuration (its name stays: the column and
// Config.Name must agree, and a rotation never renames). ErrNotFound when the project has
// no such source.
func (t *Tx) UpdateSourceConfig(ctx context.Context, projectID, id string, cfg mirror.Source) error {
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return affected(t.exec(ctx, `UPDATE sources SET config = ? WHERE project_id = ? AND id = ?`, string(b), projectID, id))
}
