package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// MaxPipelineVersions is how many of a project's pipeline versions are kept: the newest,
// enough to go back weeks of edits, while a script saving in a loop cannot grow the
// table without bound.
const MaxPipelineVersions = 100

// PipelineVersion is one saved content of a project's pipeline: who saved it
// and when; RestoredFrom names the version it restored (0 for an edit).
type PipelineVersion struct {
	ProjectID string
	Version   int64
	Pipeline  mirror.Pipeline
	// SavedBy is the user's id ("" when unknown: the pipeline a project had when
	// versions began to be kept); SavedByEmail their email, "" once they are gone.
	SavedBy      string
	SavedByEmail string
	SavedAt      time.Time
	RestoredFrom int64
}

// AddPipelineVersion records a version and drops those past the newest
// MaxPipelineVersions of the project.
func (t *Tx) AddPipelineVersion(ctx context.Context, v PipelineVersion) error {
	pipe, err := json.Marshal(v.Pipeline)
	if err != nil {
		return err
	}
	if _, err := t.exec(ctx, `INSERT INTO pipeline_versions (project_id, version, pipeline, saved_by, saved_at, restored_from) VALUES (?, ?, ?, ?, ?, ?)`,
		v.ProjectID, v.Version, string(pipe), v.SavedBy, v.SavedAt.UnixMilli(), v.RestoredFrom); err != nil {
		if isUnique(err) {
			return ErrConflict
		}
		return err
	}
	_, err = t.exec(ctx, `DELETE FROM pipeline_versions WHERE project_id = ? AND version <= ?`, v.ProjectID, v.Version-MaxPipelineVersions)
	return err
}

const versionCols = `v.project_id, v.version, v.pipeline, v.saved_by, COALESCE(u.email, ''), v.saved_at, v.restored_from`

func scanVersion(sc interface{ Scan(...any) error }) (PipelineVersion, error) {
	var v PipelineVersion
	var pipe string
	var saved int64
	if err := sc.Scan(&v.ProjectID, &v.Version, &pipe, &v.SavedBy, &v.SavedByEmail, &saved, &v.RestoredFrom); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return v, ErrNotFound
		}
		return v, err
	}
	v.SavedAt = ms(saved)
	return v, json.Unmarshal([]byte(pipe), &v.Pipeline)
}

// PipelineVersionOf returns one version of a project's pipeline; ErrNotFound when it
// was never saved or is no longer kept.
func (t *Tx) PipelineVersionOf(ctx context.Context, projectID string, version int64) (PipelineVersion, error) {
	return scanVersion(t.queryRow(ctx, `SELECT `+versionCols+` FROM pipeline_versions v LEFT JOIN users u ON u.id = v.saved_by
		WHERE v.project_id = ? AND v.version = ?`, projectID, version))
}

// PipelineVersions lists a project's kept versions, newest first: at most limit of them,
// older than before (0: from the newest).
func (t *Tx) PipelineVersions(ctx context.Context, projectID string, before int64, limit int) ([]PipelineVersion, error) {
	q := `SELECT ` + versionCols + ` FROM pipeline_versions v LEFT JOIN users u ON u.id = v.saved_by WHERE v.project_id = ?`
	args := []any{projectID}
	if before > 0 {
		q += ` AND v.version < ?`
		args = append(args, before)
	}
	rows, err := t.query(ctx, q+` ORDER BY v.version DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []PipelineVersion{}
	for rows.Next() {
		v, err := scanVersion(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
