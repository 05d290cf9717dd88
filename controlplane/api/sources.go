package api

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
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

func (s *Server) testSource(w http.ResponseWriter, r *http.Request) {
	var in service.SourceTestInput
	if e := decode(r, &in); e != nil {
		fail(w, e)
		return
	}
	res, err := s.Svc.TestSource(r.Context(), currentUser(r).ID, r.PathValue("id"), in)
	s.respond(w, r, err, http.StatusOK, func() any { return res })
}

// rotateSecretBody is the body of rotate-secret: empty (or {}) for a generated secret,
// {"secret": "..."} for one the sender issued.
type rotateSecretBody struct {
	Secret string `json:"secret"`
}

func (s *Server) rotateSourceSecret(w http.ResponseWriter, r *http.Request) {
	var b rotateSecretBody
	if e := decodeOptional(r, &b); e != nil {
		fail(w, e)
		return
	}
	v, err := s.Svc.RotateSourceSecret(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("source_id"), b.Secret)
	s.respond(w, r, err, http.StatusOK, func() any { return v })
}

// decodeOptional is decode for a body that may be left out (no bytes at all).
func decodeOptional(r *http.Request, v any) *apierror.Error {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		return badBody("the body could not be read, or is larger than " + strconv.Itoa(maxBody) + " bytes")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(strings.ToLower(ct), "application/json") {
		return apierror.New(http.StatusUnsupportedMediaType, apierror.UnsupportedMediaType, "send Content-Type: application/json")
	}
	return decodeBytes(body, v)
}
