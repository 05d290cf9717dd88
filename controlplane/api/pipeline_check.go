package api

import (
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// checkPipeline answers whether a pipeline (PUT's body) would be accepted, saving
// nothing: the dashboard asks as the user types.
func (s *Server) checkPipeline(w http.ResponseWriter, r *http.Request) {
	var b mirror.Pipeline
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	res, err := s.Svc.CheckPipelineDraft(r.Context(), currentUser(r).ID, r.PathValue("id"), b)
	s.respond(w, r, err, http.StatusOK, func() any { return res })
}
