package api

import "net/http"

// testSink sends one destination a test message now and answers what it met.
func (s *Server) testSink(w http.ResponseWriter, r *http.Request) {
	res, err := s.Svc.TestSink(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("sink_id"))
	s.respond(w, r, err, http.StatusOK, func() any { return res })
}
