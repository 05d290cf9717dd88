package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// answer maps an operation's error to a response; what names the thing operated on.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, err error, what string) {
	var ae *apierror.Error
	switch {
	case err == nil:
	case errors.As(err, &ae):
		fail(w, ae)
	case errors.Is(err, store.ErrNotFound):
		fail(w, notFound(what))
	case errors.Is(err, mirror.ErrUnavailable):
		e := apierror.New(http.StatusServiceUnavailable, apierror.Unavailable, "the configuration store (NATS) is unreachable; nothing was changed, retry shortly")
		e.RetryAfter = 5 * time.Second
		fail(w, e)
	case errors.Is(err, store.ErrConflict):
		fail(w, apierror.New(http.StatusConflict, apierror.Conflict, what+" already exists"))
	default:
		s.internal(w, r, err)
	}
}

// respond writes v with status when err is nil, else the error's answer (what="project":
// the service reports an unknown or foreign project as store.ErrNotFound).
func (s *Server) respond(w http.ResponseWriter, r *http.Request, err error, status int, v func() any) {
	if err != nil {
		s.answer(w, r, err, "project")
		return
	}
	if v == nil {
		w.WriteHeader(status)
		return
	}
	writeJSON(w, status, v())
}

func projectJSON(p store.Project, role string) map[string]any {
	// null: the deployment's default applies.
	var rate any
	if p.IngestRate.PerSecond > 0 {
		rate = map[string]any{"per_second": p.IngestRate.PerSecond, "burst": p.IngestRate.Burst}
	}
	return map[string]any{"id": p.ID, "name": p.Name, "role": role, "ingest_rate_limit": rate,
		"created_at": ts(p.CreatedAt), "updated_at": ts(p.UpdatedAt)}
}

type projectBody struct {
	Name *string `json:"name"`
}

type patchProjectBody struct {
	Name            *string      `json:"name"`
	IngestRateLimit optionalRate `json:"ingest_rate_limit"`
}

// optionalRate tells a PATCH's three cases apart: ingest_rate_limit left out (unchanged),
// null (back to the deployment's default), or an object (strictly decoded, its errors
// naming the field).
type optionalRate struct {
	set  bool
	rate store.IngestRate
}

func (o *optionalRate) UnmarshalJSON(b []byte) error {
	o.set = true
	if string(b) == "null" {
		return nil
	}
	var v struct {
		PerSecond *float64 `json:"per_second"`
		Burst     *int64   `json:"burst"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ) && typ.Field == "":
			return errors.New(`field "ingest_rate_limit" must be an object {"per_second", "burst"} or null`)
		case errors.As(err, &typ) && typ.Field == "burst":
			return errors.New(`field "ingest_rate_limit.burst" must be a whole number of records`)
		case errors.As(err, &typ):
			return fmt.Errorf("field \"ingest_rate_limit.%s\" must be a number", typ.Field)
		}
		return fmt.Errorf("ingest_rate_limit: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if v.PerSecond != nil {
		o.rate.PerSecond = *v.PerSecond
	}
	if v.Burst != nil {
		o.rate.Burst = *v.Burst
	}
	return nil
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) {
	var b projectBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	p, err := s.Svc.CreateProject(r.Context(), currentUser(r).ID, b.Name)
	s.respond(w, r, err, http.StatusCreated, func() any { return projectJSON(p, store.RoleOwner) })
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	ps, roles, err := s.Svc.Projects(r.Context(), currentUser(r).ID)
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
	p, role, err := s.Svc.Project(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return projectJSON(p, role) })
}

func (s *Server) patchProject(w http.ResponseWriter, r *http.Request) {
	var b patchProjectBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	p, role, err := s.Svc.UpdateProject(r.Context(), currentUser(r).ID, r.PathValue("id"), service.ProjectUpdate{
		Name: b.Name, SetIngestRate: b.IngestRateLimit.set, IngestRate: b.IngestRateLimit.rate})
	s.respond(w, r, err, http.StatusOK, func() any { return projectJSON(p, role) })
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.DeleteProject(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}

// --- keys ----------------------------------------------------------------------------

func keyJSON(k store.Key) map[string]any {
	out := map[string]any{"id": k.ID, "name": k.Name, "prefix": k.Prefix, "scope": k.Scope,
		"created_at": ts(k.CreatedAt), "last_used_at": ts(k.LastUsedAt)}
	if k.SourceID != "" {
		out["source_id"] = k.SourceID // an ingest-scoped key of that push source
	} else {
		out["scopes"] = service.KeyScopes(k)
	}
	return out
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.Svc.Keys(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(keys))
		for _, k := range keys {
			out = append(out, keyJSON(k))
		}
		return map[string]any{"keys": out}
	})
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Name string `json:"name"`
		// Scopes left out: ingest and results.
		Scopes []string `json:"scopes"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	k, secret, err := s.Svc.CreateScopedKey(r.Context(), currentUser(r).ID, r.PathValue("id"), b.Name, b.Scopes)
	s.respond(w, r, err, http.StatusCreated, func() any {
		out := keyJSON(k)
		out["key"] = secret // the only time it is shown
		return out
	})
}

// patchKey changes what a key may do: {"scopes": [...]}.
func (s *Server) patchKey(w http.ResponseWriter, r *http.Request) {
	var b struct {
		Scopes []string `json:"scopes"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	if b.Scopes == nil {
		fail(w, badBody(`scopes is required: the scopes the key keeps, of "ingest", "results", "read"`))
		return
	}
	k, err := s.Svc.SetKeyScopes(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("key_id"), b.Scopes)
	s.respond(w, r, err, http.StatusOK, func() any { return keyJSON(k) })
}

func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.DeleteKey(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("key_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}

// --- members -------------------------------------------------------------------------

func memberJSON(m store.Member) map[string]any {
	return map[string]any{"user_id": m.UserID, "email": m.Email, "role": m.Role, "created_at": ts(m.CreatedAt)}
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	ms, err := s.Svc.Members(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(ms))
		for _, m := range ms {
			out = append(out, memberJSON(m))
		}
		return map[string]any{"members": out}
	})
}

func (s *Server) deleteMember(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.RemoveMember(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("user_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}
