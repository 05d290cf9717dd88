package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

func accessTokenJSON(a store.AccessToken) map[string]any {
	return map[string]any{"id": a.ID, "name": a.Name, "prefix": a.Prefix, "created_at": ts(a.CreatedAt),
		"expires_at": ts(a.ExpiresAt), "last_used_at": ts(a.LastUsedAt)}
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
	}
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	a, secret, err := s.Svc.CreateAccessToken(r.Context(), currentUser(r).ID, b.Name, b.ExpiresInDays)
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
