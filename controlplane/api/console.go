package api

import (
	"net/http"
)

func (s *Server) consoleToken(w http.ResponseWriter, r *http.Request) {
	ct, err := s.Svc.IssueConsoleToken(r.Context(), currentUser(r).ID, r.PathValue("id"), currentCredential(r.Context()))
	s.respond(w, r, err, http.StatusOK, func() any { return ct })
}
