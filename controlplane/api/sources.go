package api

import (
	"encoding/json"
	"net/http"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
)

func (s *Server) listSources(w http.ResponseWriter, r *http.Request) {
	out, err := s.Svc.Sources(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any { return map[string]any{"sources": out} })
}

func (s *Server) getSource(w http.ResponseWriter, r *http.Request) {
	v, err := s.Svc.Source(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("source_id"))
	s.respond(w, r, err, http.StatusOK, func() any { return v })
}

func (s *Server) createSource(w http.ResponseWriter, r *http.Request) {
	var spec service.SourceSpec
	if e := decode(r, &spec); e != nil {
		fail(w, e)
		return
	}
	src, e := spec.Validate("", true)
	if e != nil {
		fail(w, e)
		return
	}
	v, err := s.Svc.CreateSource(r.Context(), currentUser(r).ID, r.PathValue("id"), src)
	s.respond(w, r, err, http.StatusCreated, func() any { return v })
}

func (s *Server) deleteSource(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.DeleteSource(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("source_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}

type sourceTestBody struct {
	Source   *service.SourceSpec `json:"source"`
	SourceID string              `json:"source_id"`
	Payload  json.RawMessage     `json:"payload"`
}

func (s *Server) testSource(w http.ResponseWriter, r *http.Request) {
	var b sourceTestBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	res, err := s.Svc.TestSource(r.Context(), currentUser(r).ID, r.PathValue("id"), b.Source, b.SourceID, b.Payload)
	s.respond(w, r, err, http.StatusOK, func() any { return res })
}
