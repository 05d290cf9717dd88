package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/apikey"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/pipelinecfg"
	"github.com/otelcol-svc/otelcol-svc/components/streams"
	"github.com/otelcol-svc/otelcol-svc/components/webhooksig"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// access levels of an operation on a project.
type access int

const (
	read  access = iota // any member
	write               // owner and admins
	own                 // the owner alone (deleting the project)
)

// change is what an operation does inside its transaction; ms is nil for reads. It
// records its answer in rep, which is written only once the transaction has committed.
type change func(ctx context.Context, tx *store.Tx, p store.Project, role string, ms *mirror.Store, rep *reply) error

// reply is an answer held back until the change is committed.
type reply struct {
	status int
	body   any
}

func (r *reply) set(status int, body any) { r.status, r.body = status, body }

func (r *reply) write(w http.ResponseWriter) {
	if r.body == nil {
		w.WriteHeader(r.status)
		return
	}
	writeJSON(w, r.status, r.body)
}

// onProject runs fn on the project named in the path, in a transaction, after checking
// the current user's access (see inProject), and answers.
func (s *Server) onProject(w http.ResponseWriter, r *http.Request, level access, fn change) {
	rep, err := s.inProject(r.Context(), currentUser(r).ID, r.PathValue("id"), level, fn)
	if err == nil {
		rep.write(w)
		return
	}
	s.answer(w, r, err, "project")
}

// inProject runs fn on a project in a transaction, after checking the user's access; the
// API and the MCP tools both go through it. A user who is not a member gets ErrNotFound
// whatever the project's existence, so a stranger never learns a project exists. Changes
// need the mirror: while NATS is away they are refused with 503 and nothing is saved.
func (s *Server) inProject(ctx context.Context, userID, projectID string, level access, fn change) (reply, error) {
	var ms *mirror.Store
	var rep reply
	err := s.Store.InTx(ctx, func(tx *store.Tx) error {
		p, role, err := tx.ProjectForUser(ctx, projectID, userID)
		if err != nil {
			return err
		}
		switch {
		case level == write && role == store.RoleMember:
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner and admins can change it")
		case level == own && role != store.RoleOwner:
			return apierror.New(http.StatusForbidden, apierror.Forbidden, "only the project's owner can do this")
		}
		if level != read {
			if ms, _, err = s.Mirror(ctx); err != nil {
				return unavailable("the configuration store (NATS) is unreachable; nothing was changed, retry shortly")
			}
		}
		return fn(ctx, tx, p, role, ms, &rep)
	})
	return rep, err
}

// answer maps an operation's error to a response (success was already written).
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error, what string) {
	var ae *apierror.Error
	switch {
	case err == nil:
	case errors.As(err, &ae):
		fail(w, ae)
	case errors.Is(err, store.ErrNotFound):
		fail(w, notFound(what))
	case errors.Is(err, store.ErrConflict):
		fail(w, apierror.New(http.StatusConflict, apierror.Conflict, what+" already exists"))
	default:
		s.internal(w, r, err)
	}
}

// publish writes a project's data-plane configuration (pipeline, secret, sinks,
// members) to the mirror from the transaction's view.
func publish(ctx context.Context, tx *store.Tx, ms *mirror.Store, p store.Project) error {
	sinks, err := tx.Sinks(ctx, p.ID)
	if err != nil {
		return err
	}
	members, err := tx.MemberGrants(ctx, p.ID)
	if err != nil {
		return err
	}
	return ms.PutProject(ctx, mirrorProject(p, sinks, members))
}

// mirrorProject is a project's mirror entry; members are its MemberGrants.
func mirrorProject(p store.Project, sinks []store.Sink, members map[string]int64) mirror.Project {
	mp := mirror.Project{ID: p.ID, AccountID: p.OwnerID, Name: p.Name, Version: p.Version,
		Pipeline: p.Pipeline, SigningSecret: p.SigningSecret, UpdatedAt: p.UpdatedAt, Members: members}
	for _, s := range sinks {
		mp.Sinks = append(mp.Sinks, s.Config)
	}
	return mp
}

func mirrorKey(k store.Key, accountID string) mirror.KeyEntry {
	return mirror.KeyEntry{KeyID: k.ID, ProjectID: k.ProjectID, AccountID: accountID, Scope: k.Scope, SourceID: k.SourceID}
}

func projectJSON(p store.Project, role string) map[string]any {
	return map[string]any{"id": p.ID, "name": p.Name, "role": role, "created_at": ts(p.CreatedAt), "updated_at": ts(p.UpdatedAt)}
}

type projectBody struct {
	Name *string `json:"name"`
}

func validName(n string) (string, *apierror.Error) {
	n = strings.TrimSpace(n)
	if n == "" || utf8.RuneCountInString(n) > 100 {
		return "", badBody("name must be 1 to 100 characters")
	}
	return n, nil
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) {
	var b projectBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	if b.Name == nil {
		fail(w, badBody("name is required"))
		return
	}
	name, e := validName(*b.Name)
	if e != nil {
		fail(w, e)
		return
	}
	ctx := r.Context()
	ms, js, err := s.Mirror(ctx)
	if err != nil {
		fail(w, unavailable("the configuration store (NATS) is unreachable; nothing was created, retry shortly"))
		return
	}
	now := time.Now().UTC()
	p := store.Project{ID: newID("p_"), Name: name, OwnerID: currentUser(r).ID, Pipeline: withDefaults(mirror.Pipeline{}),
		SigningSecret: webhooksig.NewSecret(), Version: 1, CreatedAt: now, UpdatedAt: now}
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateProject(ctx, p); err != nil {
			return err
		}
		// The streams exist before anyone is told the project does: a project whose
		// streams cannot be created could never receive an event.
		if e := s.createStreams(ctx, js, p.ID); e != nil {
			return e
		}
		// The owner's membership row is written with the project's creation time.
		return ms.PutProject(ctx, mirrorProject(p, nil, map[string]int64{p.OwnerID: p.CreatedAt.UnixMilli()}))
	})
	if err != nil {
		s.deleteStreams(ctx, p.ID)
		s.answer(w, r, err, "project")
		return
	}
	writeJSON(w, http.StatusCreated, projectJSON(p, store.RoleOwner))
}

// createStreams creates a new project's raw and output streams. Their per-project byte
// limit is held by the receiver, so creating them reserves nothing in nats-server's
// store (components/streams); what can still fail is NATS itself, or a store that is
// already full.
func (s *Server) createStreams(ctx context.Context, js jetstream.JetStream, project string) *apierror.Error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{streams.RawConfig(project, s.StreamLimits), streams.OutputConfig(project, s.StreamLimits)} {
		err := streams.Ensure(ctx, js, cfg)
		if err == nil {
			continue
		}
		s.Logger.Error("project not created: its streams cannot be created", "project_id", project, "stream", cfg.Name, "error", err)
		if streams.IsStorageFull(err) {
			return unavailable("the service's event storage is full, so this project's streams cannot be created; nothing was created. The operator must free or add storage (nats-server's JetStream max_store)")
		}
		return unavailable("the data plane (NATS JetStream) could not create this project's streams; nothing was created, retry shortly")
	}
	return nil
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	var ps []store.Project
	var roles []string
	err := s.Store.InTx(r.Context(), func(tx *store.Tx) error {
		var err error
		ps, roles, err = tx.ProjectsForUser(r.Context(), currentUser(r).ID)
		return err
	})
	if err != nil {
		s.internal(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(ps))
	for i, p := range ps {
		out = append(out, projectJSON(p, roles[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out})
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(_ context.Context, _ *store.Tx, p store.Project, role string, _ *mirror.Store, rep *reply) error {
		rep.set(http.StatusOK, projectJSON(p, role))
		return nil
	})
}

func (s *Server) patchProject(w http.ResponseWriter, r *http.Request) {
	var b projectBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, role string, ms *mirror.Store, rep *reply) error {
		if b.Name != nil {
			name, e := validName(*b.Name)
			if e != nil {
				return e
			}
			p.Name = name
		}
		p.Version++
		p.UpdatedAt = time.Now().UTC()
		if err := tx.UpdateProject(ctx, p); err != nil {
			return err
		}
		if err := publish(ctx, tx, ms, p); err != nil {
			return err
		}
		rep.set(http.StatusOK, projectJSON(p, role))
		return nil
	})
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	var deleted string
	s.onProject(w, r, own, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		keys, err := tx.Keys(ctx, p.ID)
		if err != nil {
			return err
		}
		sources, err := tx.Sources(ctx, p.ID)
		if err != nil {
			return err
		}
		if err := tx.DeleteProject(ctx, p.ID); err != nil {
			return err
		}
		// Keys first (the sources' ingest-scoped keys among them): from here on nothing
		// can write into the project. Then the sources, so their URLs stop answering
		// also where ingest needs no key.
		for _, k := range keys {
			if err := ms.DeleteKey(ctx, k.Hash); err != nil {
				return err
			}
		}
		for _, src := range sources {
			if err := ms.DeleteSource(ctx, src.IngestKey); err != nil {
				return err
			}
		}
		if err := ms.DeleteProject(ctx, p.ID); err != nil {
			return err
		}
		deleted = p.ID
		rep.set(http.StatusNoContent, nil)
		return nil
	})
	if deleted != "" {
		s.deleteStreams(r.Context(), deleted)
	}
}

// deleteStreams removes a deleted project's streams (and so their consumers). A failure
// only delays the space being freed: the streams' age limit removes the data anyway.
func (s *Server) deleteStreams(ctx context.Context, project string) {
	_, js, err := s.Mirror(ctx)
	if err != nil {
		s.Logger.Warn("streams of a deleted project not removed: NATS unreachable", "project_id", project)
		return
	}
	for _, name := range []string{streams.RawStream(project), streams.OutputStream(project), streams.DeadLetterStream(project)} {
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			s.Logger.Warn("stream of a deleted project not removed", "stream", name, "error", err)
		}
	}
}

// --- keys ----------------------------------------------------------------------------

func keyJSON(k store.Key) map[string]any {
	out := map[string]any{"id": k.ID, "name": k.Name, "prefix": k.Prefix, "scope": k.Scope,
		"created_at": ts(k.CreatedAt), "last_used_at": ts(k.LastUsedAt)}
	if k.SourceID != "" {
		out["source_id"] = k.SourceID // an ingest-scoped key of that push source
	}
	return out
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store, rep *reply) error {
		keys, err := tx.Keys(ctx, p.ID)
		if err != nil {
			return err
		}
		// Last use is reported by the data plane into the mirror; without NATS the
		// listing still works, without it.
		ms, _, _ := s.Mirror(ctx)
		out := make([]map[string]any, 0, len(keys))
		for _, k := range keys {
			if ms != nil {
				k.LastUsedAt = ms.KeyLastUsed(ctx, k.ID)
			}
			out = append(out, keyJSON(k))
		}
		rep.set(http.StatusOK, map[string]any{"keys": out})
		return nil
	})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	if b.Name == "" {
		b.Name = "default"
	}
	name, e := validName(b.Name)
	if e != nil {
		fail(w, e)
		return
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		secret := apikey.Generate(apikey.KindProject)
		k := store.Key{ID: newID("k_"), ProjectID: p.ID, Name: name, Prefix: apikey.Prefix(secret), Hash: apikey.Hash(secret),
			Scope: mirror.ScopeProject, CreatedAt: time.Now().UTC()}
		if err := tx.CreateKey(ctx, k); err != nil {
			return err
		}
		if err := ms.PutKey(ctx, k.Hash, mirrorKey(k, p.OwnerID)); err != nil {
			return err
		}
		out := keyJSON(k)
		out["key"] = secret // the only time it is shown
		rep.set(http.StatusCreated, out)
		return nil
	})
}

func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		k, err := tx.DeleteKey(ctx, p.ID, r.PathValue("key_id"))
		if errors.Is(err, store.ErrNotFound) {
			return notFound("key")
		}
		if err != nil {
			return err
		}
		if err := ms.DeleteKey(ctx, k.Hash); err != nil {
			return err
		}
		_ = ms.ForgetKeyUsage(ctx, k.ID)
		rep.set(http.StatusNoContent, nil)
		return nil
	})
}

// --- members -------------------------------------------------------------------------

func memberJSON(m store.Member) map[string]any {
	return map[string]any{"user_id": m.UserID, "email": m.Email, "role": m.Role, "created_at": ts(m.CreatedAt)}
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store, rep *reply) error {
		ms, err := tx.Members(ctx, p.ID)
		if err != nil {
			return err
		}
		out := make([]map[string]any, 0, len(ms))
		for _, m := range ms {
			out = append(out, memberJSON(m))
		}
		rep.set(http.StatusOK, map[string]any{"members": out})
		return nil
	})
}

func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	email, ok := normalizeEmail(b.Email)
	if !ok {
		fail(w, badBody("email must be an address like ops@example.com"))
		return
	}
	if b.Role == "" {
		b.Role = store.RoleMember
	}
	if b.Role != store.RoleAdmin && b.Role != store.RoleMember {
		fail(w, badBody(`role must be "admin" or "member"`))
		return
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		u, err := tx.UserByEmail(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			return apierror.New(http.StatusNotFound, apierror.NotFound, "no account with this email; ask them to sign up first")
		}
		if err != nil {
			return err
		}
		if u.ID == p.OwnerID {
			return apierror.New(http.StatusConflict, apierror.Conflict, "this user owns the project; the owner's role cannot change")
		}
		if err := tx.PutMember(ctx, p.ID, u.ID, b.Role); err != nil {
			return err
		}
		if err := publish(ctx, tx, ms, p); err != nil { // their console tokens work from now
			return err
		}
		rep.set(http.StatusCreated, map[string]any{"user_id": u.ID, "email": u.Email, "role": b.Role})
		return nil
	})
}

func (s *Server) deleteMember(w http.ResponseWriter, r *http.Request) {
	target := r.PathValue("user_id")
	level := write
	if target == currentUser(r).ID {
		level = read // anyone may leave a project
	}
	s.onProject(w, r, level, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		if target == p.OwnerID {
			return apierror.New(http.StatusConflict, apierror.Conflict, "the owner cannot be removed; delete the project instead")
		}
		if err := tx.DeleteMember(ctx, p.ID, target); errors.Is(err, store.ErrNotFound) {
			return notFound("member")
		} else if err != nil {
			return err
		}
		// The receivers end the member's console tokens when the project's mirror entry
		// no longer lists them; committed only once the mirror has it.
		if ms == nil { // leaving, which needs only read access, gets no mirror from onProject
			var err error
			if ms, _, err = s.Mirror(ctx); err != nil {
				return unavailable("the configuration store (NATS) is unreachable; nothing was changed, retry shortly")
			}
		}
		if err := publish(ctx, tx, ms, p); err != nil {
			return err
		}
		rep.set(http.StatusNoContent, nil)
		return nil
	})
}

// withDefaults fills contract section 6's defaults.
func withDefaults(p mirror.Pipeline) mirror.Pipeline {
	if p.BatchSize == 0 {
		p.BatchSize = pipelinecfg.DefaultBatchSize
	}
	if p.WindowDurationSeconds == 0 {
		p.WindowDurationSeconds = int(pipelinecfg.DefaultWindowDuration / time.Second)
	}
	if p.Transforms == nil {
		p.Transforms = []string{}
	}
	return p
}
