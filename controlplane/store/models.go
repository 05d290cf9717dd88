package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Roles of project members.
const (
	RoleOwner  = "owner"
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// User is an account.
type User struct {
	ID           string
	Email        string
	PasswordHash string
	CreatedAt    time.Time
	// EmailVerifiedAt is when the account proved it receives mail at Email (zero: never);
	// only then can invitations find it (emailtokens.go).
	EmailVerifiedAt time.Time
}

// Project is a project with its configuration.
type Project struct {
	ID            string
	Name          string
	OwnerID       string
	Pipeline      mirror.Pipeline
	SigningSecret string
	// Version counts every change of the project (sinks, members, secret...): the
	// mirror entry's version. PipelineVersion counts changes of the pipeline's content
	// only, each kept in pipeline_versions (versions.go).
	Version         int64
	PipelineVersion int64
	// AgentSince is when the pipeline's agent URL last went from empty to set (zero:
	// never, or before it was recorded), by the control plane's clock.
	AgentSince time.Time
	// AgentSinceSeq is the last sequence of the project's raw stream when AgentSince was
	// recorded (0: not recorded): the pipeline starts right after it.
	AgentSinceSeq uint64
	// IngestRate is the project's own ingest rate limit; its zero value means the
	// deployment's default.
	IngestRate IngestRate
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// IngestRate is an ingest rate limit: records per second with a burst (0: as many as one
// second's rate). PerSecond 0 means "the deployment's default".
type IngestRate struct {
	PerSecond float64
	Burst     int64
}

// Member is a user's role in a project.
type Member struct {
	UserID    string
	Email     string
	Role      string
	CreatedAt time.Time
}

// Key is an API key, without the key itself (only its hash is stored).
type Key struct {
	ID         string
	ProjectID  string
	Name       string
	Prefix     string
	Hash       string
	Scope      string
	SourceID   string
	CreatedAt  time.Time
	LastUsedAt time.Time
	// Scopes are what a project key may do (mirror.PermIngest, PermResults, PermRead);
	// nil for a key made before keys had scopes, which may do all three.
	Scopes []string
}

// Sink is a destination of agent results.
type Sink struct {
	ID        string
	ProjectID string
	Config    mirror.Sink
	CreatedAt time.Time
	UpdatedAt time.Time
}

// unixMs is ms's inverse: the zero time is 0.
func unixMs(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func ms(t int64) time.Time {
	if t == 0 {
		return time.Time{}
	}
	return time.UnixMilli(t).UTC()
}

// CreateUser adds an account; ErrConflict when the email is taken.
func (t *Tx) CreateUser(ctx context.Context, u User) error {
	_, err := t.exec(ctx, `INSERT INTO users (id, email, password_hash, created_at) VALUES (?, ?, ?, ?)`,
		u.ID, u.Email, u.PasswordHash, u.CreatedAt.UnixMilli())
	if isUnique(err) {
		return ErrConflict
	}
	return err
}

func (t *Tx) user(ctx context.Context, where string, arg any) (User, error) {
	var u User
	var created, verified int64
	err := t.queryRow(ctx, `SELECT id, email, password_hash, created_at, email_verified_at FROM users WHERE `+where, arg).Scan(&u.ID, &u.Email, &u.PasswordHash, &created, &verified)
	if errors.Is(err, sql.ErrNoRows) {
		return u, ErrNotFound
	}
	u.CreatedAt, u.EmailVerifiedAt = ms(created), ms(verified)
	return u, err
}

// UserByEmail finds an account by its (normalised) email.
func (t *Tx) UserByEmail(ctx context.Context, email string) (User, error) {
	return t.user(ctx, "email = ?", email)
}

// AllUsers lists every account by email (for `accounts list`).
func (t *Tx) AllUsers(ctx context.Context) ([]User, error) {
	rows, err := t.query(ctx, `SELECT id, email, password_hash, created_at FROM users ORDER BY email`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var us []User
	for rows.Next() {
		var u User
		var created int64
		if err := rows.Scan(&u.ID, &u.Email, &u.PasswordHash, &created); err != nil {
			return nil, err
		}
		u.CreatedAt = ms(created)
		us = append(us, u)
	}
	return us, rows.Err()
}

// UserByID finds an account.
func (t *Tx) UserByID(ctx context.Context, id string) (User, error) { return t.user(ctx, "id = ?", id) }

// CreateProject adds a project and makes its creator the owner.
func (t *Tx) CreateProject(ctx context.Context, p Project) error {
	pipe, err := json.Marshal(p.Pipeline)
	if err != nil {
		return err
	}
	if p.PipelineVersion == 0 {
		p.PipelineVersion = 1
	}
	if _, err := t.exec(ctx, `INSERT INTO projects (id, name, owner_id, pipeline, signing_secret, version, pipeline_version, agent_since, agent_since_seq, ingest_rate_per_second, ingest_rate_burst, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, p.Name, p.OwnerID, string(pipe), p.SigningSecret, p.Version, p.PipelineVersion, unixMs(p.AgentSince), int64(p.AgentSinceSeq), p.IngestRate.PerSecond, p.IngestRate.Burst, p.CreatedAt.UnixMilli(), p.UpdatedAt.UnixMilli()); err != nil {
		return err
	}
	// The project's first pipeline is its version 1, saved by its creator.
	if err := t.AddPipelineVersion(ctx, PipelineVersion{ProjectID: p.ID, Version: p.PipelineVersion, Pipeline: p.Pipeline,
		SavedBy: p.OwnerID, SavedAt: p.CreatedAt}); err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)`, p.ID, p.OwnerID, RoleOwner, p.CreatedAt.UnixMilli())
	return err
}

const projectCols = `p.id, p.name, p.owner_id, p.pipeline, p.signing_secret, p.version, p.pipeline_version, p.agent_since, p.agent_since_seq, p.ingest_rate_per_second, p.ingest_rate_burst, p.created_at, p.updated_at`

func scanProject(sc interface{ Scan(...any) error }, extra ...any) (Project, error) {
	var p Project
	var pipe string
	var created, updated, agentSince, agentSinceSeq int64
	dest := append([]any{&p.ID, &p.Name, &p.OwnerID, &pipe, &p.SigningSecret, &p.Version, &p.PipelineVersion, &agentSince, &agentSinceSeq, &p.IngestRate.PerSecond, &p.IngestRate.Burst, &created, &updated}, extra...)
	if err := sc.Scan(dest...); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return p, ErrNotFound
		}
		return p, err
	}
	p.CreatedAt, p.UpdatedAt, p.AgentSince = ms(created), ms(updated), ms(agentSince)
	p.AgentSinceSeq = uint64(max(agentSinceSeq, 0))
	return p, json.Unmarshal([]byte(pipe), &p.Pipeline)
}

// ProjectForUser returns a project and the user's role in it; ErrNotFound when the user is
// not a member (a stranger never learns the project exists).
func (t *Tx) ProjectForUser(ctx context.Context, id, userID string) (Project, string, error) {
	var role string
	p, err := scanProject(t.queryRow(ctx, `SELECT `+projectCols+`, m.role FROM projects p JOIN members m ON m.project_id = p.id WHERE p.id = ? AND m.user_id = ?`, id, userID), &role)
	return p, role, err
}

// ProjectsForUser lists the projects a user is a member of, with the user's role.
func (t *Tx) ProjectsForUser(ctx context.Context, userID string) ([]Project, []string, error) {
	rows, err := t.query(ctx, `SELECT `+projectCols+`, m.role FROM projects p JOIN members m ON m.project_id = p.id WHERE m.user_id = ? ORDER BY p.created_at, p.id`, userID)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var ps []Project
	var roles []string
	for rows.Next() {
		var role string
		p, err := scanProject(rows, &role)
		if err != nil {
			return nil, nil, err
		}
		ps = append(ps, p)
		roles = append(roles, role)
	}
	return ps, roles, rows.Err()
}

// AllProjects lists every project, for re-publishing the mirror.
func (t *Tx) AllProjects(ctx context.Context) ([]Project, error) {
	rows, err := t.query(ctx, `SELECT `+projectCols+` FROM projects p ORDER BY p.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ps []Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, rows.Err()
}

// UpdateProject saves name, pipeline (with its version and agent_since), signing secret
// and ingest rate with a new version. A new pipeline version's history entry is the
// caller's (AddPipelineVersion).
func (t *Tx) UpdateProject(ctx context.Context, p Project) error {
	pipe, err := json.Marshal(p.Pipeline)
	if err != nil {
		return err
	}
	return affected(t.exec(ctx, `UPDATE projects SET name = ?, pipeline = ?, signing_secret = ?, version = ?, pipeline_version = ?, agent_since = ?, agent_since_seq = ?, ingest_rate_per_second = ?, ingest_rate_burst = ?, updated_at = ? WHERE id = ?`,
		p.Name, string(pipe), p.SigningSecret, p.Version, p.PipelineVersion, unixMs(p.AgentSince), int64(p.AgentSinceSeq), p.IngestRate.PerSecond, p.IngestRate.Burst, p.UpdatedAt.UnixMilli(), p.ID))
}

// DeleteProject removes a project with its members, keys, sinks and sources.
func (t *Tx) DeleteProject(ctx context.Context, id string) error {
	for _, q := range []string{`DELETE FROM api_keys WHERE project_id = ?`, `DELETE FROM sinks WHERE project_id = ?`, `DELETE FROM sources WHERE project_id = ?`, `DELETE FROM members WHERE project_id = ?`, `DELETE FROM pipeline_versions WHERE project_id = ?`} {
		if _, err := t.exec(ctx, q, id); err != nil {
			return err
		}
	}
	return affected(t.exec(ctx, `DELETE FROM projects WHERE id = ?`, id))
}

// Members lists a project's members.
func (t *Tx) Members(ctx context.Context, projectID string) ([]Member, error) {
	rows, err := t.query(ctx, `SELECT m.user_id, u.email, m.role, m.created_at FROM members m JOIN users u ON u.id = m.user_id WHERE m.project_id = ? ORDER BY m.created_at, u.email`, projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Member
	for rows.Next() {
		var m Member
		var created int64
		if err := rows.Scan(&m.UserID, &m.Email, &m.Role, &created); err != nil {
			return nil, err
		}
		m.CreatedAt = ms(created)
		out = append(out, m)
	}
	return out, rows.Err()
}

// MemberGrants returns a project's members: user id → when the membership began (unix
// milliseconds). The mirror carries it so receivers honour a console token only while
// the membership it was issued under lasts: removed (or removed and added again), the
// user is absent (or has another value). A role change keeps the value.
func (t *Tx) MemberGrants(ctx context.Context, projectID string) (map[string]Grant, error) {
	all, err := t.memberGrants(ctx, `WHERE project_id = ?`, projectID)
	return all[projectID], err
}

// AllMemberGrants is MemberGrants of every project, in one query.
func (t *Tx) AllMemberGrants(ctx context.Context) (map[string]map[string]Grant, error) {
	return t.memberGrants(ctx, ``)
}

// Grant is a membership as the data plane needs it: when it began (a console token names
// it) and its role (what the token may do beyond reading).
type Grant struct {
	Since int64
	Role  string
}

func (t *Tx) memberGrants(ctx context.Context, where string, args ...any) (map[string]map[string]Grant, error) {
	rows, err := t.query(ctx, `SELECT project_id, user_id, created_at, role FROM members `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]Grant{}
	for rows.Next() {
		var project, user, role string
		var since int64
		if err := rows.Scan(&project, &user, &since, &role); err != nil {
			return nil, err
		}
		if out[project] == nil {
			out[project] = map[string]Grant{}
		}
		out[project][user] = Grant{Since: since, Role: role}
	}
	return out, rows.Err()
}

// PutMember adds a member or changes its role.
func (t *Tx) PutMember(ctx context.Context, projectID, userID, role string) error {
	_, err := t.exec(ctx, `INSERT INTO members (project_id, user_id, role, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (project_id, user_id) DO UPDATE SET role = excluded.role`, projectID, userID, role, now())
	return err
}

// DeleteMember removes a member.
func (t *Tx) DeleteMember(ctx context.Context, projectID, userID string) error {
	return affected(t.exec(ctx, `DELETE FROM members WHERE project_id = ? AND user_id = ?`, projectID, userID))
}

// CreateKey stores a key's hash.
func (t *Tx) CreateKey(ctx context.Context, k Key) error {
	_, err := t.exec(ctx, `INSERT INTO api_keys (id, project_id, name, prefix, hash, scope, source_id, created_at, scopes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		k.ID, k.ProjectID, k.Name, k.Prefix, k.Hash, k.Scope, k.SourceID, k.CreatedAt.UnixMilli(), strings.Join(k.Scopes, ","))
	return err
}

func (t *Tx) keys(ctx context.Context, where string, args ...any) ([]Key, error) {
	rows, err := t.query(ctx, `SELECT id, project_id, name, prefix, hash, scope, source_id, created_at, last_used_at, scopes FROM api_keys WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var k Key
		var created, used int64
		var scopes string
		if err := rows.Scan(&k.ID, &k.ProjectID, &k.Name, &k.Prefix, &k.Hash, &k.Scope, &k.SourceID, &created, &used, &scopes); err != nil {
			return nil, err
		}
		k.CreatedAt, k.LastUsedAt, k.Scopes = ms(created), ms(used), splitList(scopes)
		out = append(out, k)
	}
	return out, rows.Err()
}

// Keys lists a project's keys.
func (t *Tx) Keys(ctx context.Context, projectID string) ([]Key, error) {
	return t.keys(ctx, "project_id = ?", projectID)
}

// AllKeys lists every key, for re-publishing the mirror.
func (t *Tx) AllKeys(ctx context.Context) ([]Key, error) { return t.keys(ctx, "1 = 1") }

// DeleteKey removes one key of a project and returns it (its hash revokes it in the mirror).
func (t *Tx) DeleteKey(ctx context.Context, projectID, keyID string) (Key, error) {
	ks, err := t.keys(ctx, "project_id = ? AND id = ?", projectID, keyID)
	if err != nil {
		return Key{}, err
	}
	if len(ks) == 0 {
		return Key{}, ErrNotFound
	}
	return ks[0], affected(t.exec(ctx, `DELETE FROM api_keys WHERE id = ?`, keyID))
}

// CreateSink stores a sink.
func (t *Tx) CreateSink(ctx context.Context, s Sink) error {
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	_, err = t.exec(ctx, `INSERT INTO sinks (id, project_id, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`,
		s.ID, s.ProjectID, string(cfg), s.CreatedAt.UnixMilli(), s.UpdatedAt.UnixMilli())
	return err
}

// Sinks lists a project's sinks.
func (t *Tx) Sinks(ctx context.Context, projectID string) ([]Sink, error) {
	rows, err := t.query(ctx, `SELECT id, project_id, config, created_at, updated_at FROM sinks WHERE project_id = ? ORDER BY created_at, id`, projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Sink
	for rows.Next() {
		var s Sink
		var cfg string
		var created, updated int64
		if err := rows.Scan(&s.ID, &s.ProjectID, &cfg, &created, &updated); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(cfg), &s.Config); err != nil {
			return nil, err
		}
		s.CreatedAt, s.UpdatedAt = ms(created), ms(updated)
		out = append(out, s)
	}
	return out, rows.Err()
}

// UpdateSink saves a sink's configuration.
func (t *Tx) UpdateSink(ctx context.Context, s Sink) error {
	cfg, err := json.Marshal(s.Config)
	if err != nil {
		return err
	}
	return affected(t.exec(ctx, `UPDATE sinks SET config = ?, updated_at = ? WHERE id = ? AND project_id = ?`, string(cfg), s.UpdatedAt.UnixMilli(), s.ID, s.ProjectID))
}

// DeleteSink removes a sink.
func (t *Tx) DeleteSink(ctx context.Context, projectID, id string) error {
	return affected(t.exec(ctx, `DELETE FROM sinks WHERE id = ? AND project_id = ?`, id, projectID))
}
