package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/streams"
	"github.com/otelcol-svc/otelcol-svc/internal/webhooksig"
)

// ValidName trims a project or key name and checks its length.
func ValidName(n string) (string, *apierror.Error) {
	n = strings.TrimSpace(n)
	if n == "" || utf8.RuneCountInString(n) > 100 {
		return "", BadBody("name must be 1 to 100 characters")
	}
	return n, nil
}

// Projects lists the user's projects with their role in each.
func (s *Service) Projects(ctx context.Context, userID string) (ps []store.Project, roles []string, err error) {
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		ps, roles, err = tx.ProjectsForUser(ctx, userID)
		return err
	})
	ps, roles = LimitsOf(ctx).filter(ps, roles)
	return ps, roles, err
}

// Project returns a project the user is a member of, with their role.
func (s *Service) Project(ctx context.Context, userID, id string) (p store.Project, role string, err error) {
	err = s.InProject(ctx, userID, id, Read, func(_ context.Context, _ *store.Tx, pr store.Project, r string, _ *mirror.Store) error {
		p, role = pr, r
		return nil
	})
	return p, role, err
}

// CreateProject creates a project owned by the user, with its streams, and publishes it.
// name is nil when the request named none.
func (s *Service) CreateProject(ctx context.Context, userID string, name *string) (store.Project, error) {
	if name == nil {
		return store.Project{}, BadBody("name is required")
	}
	n, e := ValidName(*name)
	if e != nil {
		return store.Project{}, e
	}
	if l := LimitsOf(ctx); l.ReadOnly || l.Projects != nil {
		return store.Project{}, LimitedTokenRefusal
	}
	ms, js, err := s.Mirror(ctx)
	if err != nil {
		return store.Project{}, Unavailable("the configuration store (NATS) is unreachable; nothing was created, retry shortly")
	}
	now := time.Now().UTC()
	p := store.Project{ID: NewID("p_"), Name: n, OwnerID: userID, Pipeline: WithDefaults(mirror.Pipeline{}),
		SigningSecret: webhooksig.NewSecret(), Version: 1, CreatedAt: now, UpdatedAt: now}
	err = s.Store.InTx(ctx, func(tx *store.Tx) error {
		if err := tx.CreateOwnedProject(ctx, p, s.MaxProjects); err != nil {
			var le *store.ProjectLimitError
			if errors.As(err, &le) {
				return ProjectLimitReached(le.Limit)
			}
			return err
		}
		store.AuditOf(ctx).SetProject(p.ID)
		store.AuditOf(ctx).Change(nil, map[string]string{"name": p.Name})
		// The streams exist before anyone is told the project does: a project whose
		// streams cannot be created could never receive an event.
		if e := s.createStreams(ctx, js, p.ID); e != nil {
			return e
		}
		// The owner's membership row is written with the project's creation time.
		return ms.PutProject(ctx, mirrorProject(p, nil, map[string]store.Grant{p.OwnerID: {Since: p.CreatedAt.UnixMilli(), Role: store.RoleOwner}}))
	})
	if err != nil {
		if !isProjectLimit(err) { // refused before any stream was made
			s.deleteStreams(ctx, p.ID)
		}
		return store.Project{}, err
	}
	return p, nil
}

// ProjectLimitReached refuses a project to an account that owns limit of them already.
func ProjectLimitReached(limit int64) *apierror.Error {
	e := apierror.New(http.StatusForbidden, apierror.ProjectLimitReached, fmt.Sprintf(
		"your account has reached its limit of %d projects; delete one you no longer use, or ask the operator to raise the limit", limit))
	e.Limit = limit
	return e
}

func isProjectLimit(err error) bool {
	var ae *apierror.Error
	return errors.As(err, &ae) && ae.Code == apierror.ProjectLimitReached
}

// createStreams creates a new project's raw and output streams. Their per-project byte
// limit is held by the receiver, so creating them reserves nothing in nats-server's
// store (internal/streams); what can still fail is NATS itself, or a store that is
// already full.
func (s *Service) createStreams(ctx context.Context, js jetstream.JetStream, project string) *apierror.Error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, cfg := range []jetstream.StreamConfig{streams.RawConfig(project, s.StreamLimits), streams.OutputConfig(project, s.StreamLimits)} {
		err := streams.Ensure(ctx, js, cfg)
		if err == nil {
			continue
		}
		s.Logger.Error("project not created: its streams cannot be created", "project_id", project, "stream", cfg.Name, "error", err)
		if streams.IsStorageFull(err) {
			return Unavailable("the service's event storage is full, so this project's streams cannot be created; nothing was created. The operator must free or add storage (nats-server's JetStream max_store)")
		}
		return Unavailable("the data plane (NATS JetStream) could not create this project's streams; nothing was created, retry shortly")
	}
	return nil
}

// DeleteProject deletes a project (the owner alone), its keys and sources, from the
// database and the mirror, then its streams.
func (s *Service) DeleteProject(ctx context.Context, userID, id string) error {
	var deleted string
	err := s.InProject(ctx, userID, id, Own, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
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
		return nil
	})
	if deleted != "" {
		s.deleteStreams(ctx, deleted)
	}
	return err
}

// deleteStreams removes a deleted project's streams (and so their consumers). A failure
// only delays the space being freed: the streams' age limit removes the data anyway.
func (s *Service) deleteStreams(ctx context.Context, project string) {
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

// Keys lists a project's API keys with their last use (reported by the data plane into
// the mirror; without NATS the listing still works, without it).
func (s *Service) Keys(ctx context.Context, userID, id string) (keys []store.Key, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		if keys, err = tx.Keys(ctx, p.ID); err != nil {
			return err
		}
		ms, _, _ := s.Mirror(ctx)
		for i := range keys {
			if ms != nil {
				keys[i].LastUsedAt = ms.KeyLastUsed(ctx, keys[i].ID)
			}
		}
		return nil
	})
	return keys, err
}

// CreateKey creates a project API key with the default scopes (DefaultKeyScopes); secret
// is the key itself, shown only now.
func (s *Service) CreateKey(ctx context.Context, userID, id, name string) (k store.Key, secret string, err error) {
	return s.CreateScopedKey(ctx, userID, id, name, nil)
}

// CreateScopedKey creates a project API key that may do what scopes say (nil:
// DefaultKeyScopes); secret is the key itself, shown only now.
func (s *Service) CreateScopedKey(ctx context.Context, userID, id, name string, scopes []string) (k store.Key, secret string, err error) {
	if name == "" {
		name = "default"
	}
	name, e := ValidName(name)
	if e != nil {
		return k, "", e
	}
	if scopes == nil {
		scopes = DefaultKeyScopes
	}
	if scopes, e = ValidKeyScopes(scopes); e != nil {
		return k, "", e
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		secret = apikey.Generate(apikey.KindProject)
		k = store.Key{ID: NewID("k_"), ProjectID: p.ID, Name: name, Prefix: apikey.Prefix(secret), Hash: apikey.Hash(secret),
			Scope: mirror.ScopeProject, Scopes: scopes, CreatedAt: time.Now().UTC()}
		if err := tx.CreateKey(ctx, k); err != nil {
			return err
		}
		store.AuditOf(ctx).SetTarget(k.ID)
		store.AuditOf(ctx).Change(nil, map[string]any{"name": k.Name, "scopes": k.Scopes})
		return ms.PutKey(ctx, k.Hash, mirrorKey(k, p.OwnerID))
	})
	return k, secret, err
}

// DeleteKey revokes a key.
func (s *Service) DeleteKey(ctx context.Context, userID, id, keyID string) error {
	return s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		k, err := tx.DeleteKey(ctx, p.ID, keyID)
		if errors.Is(err, store.ErrNotFound) {
			return NotFound("key")
		}
		if err != nil {
			return err
		}
		if err := ms.DeleteKey(ctx, k.Hash); err != nil {
			return err
		}
		_ = ms.ForgetKeyUsage(ctx, k.ID)
		return nil
	})
}

// --- members -------------------------------------------------------------------------

// Members lists a project's members.
func (s *Service) Members(ctx context.Context, userID, id string) (members []store.Member, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		members, err = tx.Members(ctx, p.ID)
		return err
	})
	return members, err
}

// AddMember gives the account of email a role in the project (or changes it).
func (s *Service) AddMember(ctx context.Context, userID, id, email, role string) (store.User, string, error) {
	email, ok := NormalizeEmail(email)
	if !ok {
		return store.User{}, "", BadBody("email must be an address like ops@example.com")
	}
	role, err := checkRole(role)
	if err != nil {
		return store.User{}, "", err
	}
	var u store.User
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		var err error
		u, err = tx.UserByEmail(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			return apierror.New(http.StatusNotFound, apierror.NotFound, "no account with this email; ask them to sign up first")
		}
		if err != nil {
			return err
		}
		if u.ID == p.OwnerID {
			return apierror.New(http.StatusConflict, apierror.Conflict, "this user owns the project; the owner's role cannot change")
		}
		ev := store.AuditOf(ctx)
		ev.SetTarget(u.ID)
		if _, was, err := tx.ProjectForUser(ctx, p.ID, u.ID); err == nil {
			ev.SetAction("member.role")
			ev.Change(map[string]string{"email": u.Email, "role": was}, map[string]string{"email": u.Email, "role": role})
		} else {
			ev.Change(nil, map[string]string{"email": u.Email, "role": role})
		}
		if err := tx.PutMember(ctx, p.ID, u.ID, role); err != nil {
			return err
		}
		// A new version, like every change: a publish of the whole configuration skips
		// entries the mirror holds at the same or a later version (resync.go).
		return saveProject(ctx, tx, ms, &p) // their console tokens work from now
	})
	return u, role, err
}

// RemoveMember ends a membership; anyone may leave a project, owners and admins may
// remove others.
func (s *Service) RemoveMember(ctx context.Context, userID, id, target string) error {
	level := Write
	if target == userID {
		level = Read // anyone may leave a project
	}
	return s.InProject(ctx, userID, id, level, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		if target == p.OwnerID {
			return apierror.New(http.StatusConflict, apierror.Conflict, "the owner cannot be removed; delete the project instead")
		}
		// The record names who was removed as people know them; their account may go.
		if u, err := tx.UserByID(ctx, target); err == nil {
			store.AuditOf(ctx).Change(map[string]string{"email": u.Email}, nil)
		}
		if err := tx.DeleteMember(ctx, p.ID, target); errors.Is(err, store.ErrNotFound) {
			return NotFound("member")
		} else if err != nil {
			return err
		}
		// The receivers end the member's console tokens when the project's mirror entry
		// no longer lists them; committed only once the mirror has it.
		if ms == nil { // leaving, which needs only read access, gets no mirror from InProject
			var err error
			if ms, err = s.mirrorForChange(ctx); err != nil {
				return err
			}
		}
		return saveProject(ctx, tx, ms, &p)
	})
}

// NormalizeEmail lowercases and checks an email address.
func NormalizeEmail(e string) (string, bool) {
	e = strings.ToLower(strings.TrimSpace(e))
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" || len(e) > 254 {
		return "", false
	}
	return e, true
}
