package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func accessTokenJSON(a store.AccessToken) map[string]any {
	projects := []string{}
	if a.ProjectIDs != nil {
		projects = a.ProjectIDs
	}
	// projects [] means all of the owner's projects.
	return map[string]any{"id": a.ID, "name": a.Name, "prefix": a.Prefix, "created_at": ts(a.CreatedAt),
		"expires_at": ts(a.ExpiresAt), "last_used_at": ts(a.LastUsedAt), "projects": projects, "read_only": a.ReadOnly}
}

func (s *Server) listAccessTokens(w http.ResponseWriter, r *http.Request) {
	as, err := s.Svc.AccessTokens(r.Context(), currentUser(r).ID)
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(as))
		for _, a := range as {
			out = append(out, accessTokenJSON(a))
		}
		return map[string]any{"tokens": out}
	})
}

func (s *Server) createAccessToken(w http.ResponseWriter, r *http.Request) {
	if viaAccessToken(r) {
		fail(w, service.NoTokenFromToken)
		return
	}
	var b struct {
		Name          string `json:"name"`
		ExpiresInDays int    `json:"expires_in_days"`
		// Projects limits the token to these projects; left out or null: all of yours.
		Projects []string `json:"projects"`
		ReadOnly bool     `json:"read_only"`
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	a, secret, err := s.Svc.CreateLimitedAccessToken(r.Context(), currentUser(r).ID, b.Name, b.ExpiresInDays,
		service.Limits{Projects: b.Projects, ReadOnly: b.ReadOnly})
	s.respond(w, r, err, http.StatusCreated, func() any {
		out := accessTokenJSON(a)
		out["token"] = secret // the only time it is shown
		return out
	})
}

func (s *Server) revokeAccessToken(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.RevokeAccessToken(r.Context(), currentUser(r).ID, r.PathValue("token_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}
