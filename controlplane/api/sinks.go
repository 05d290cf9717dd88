package api

import (
	"net/http"
	"net/url"

	"github.com/otelcol-svc/otelcol-svc/controlplane/service"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// redacted replaces a secret a reader may not see.
const redacted = "[redacted]"

// redactURL shows a destination URL without what may be its secret: for chat webhooks
// (Slack, Discord, Teams) the path is the credential, so only scheme and host remain;
// for other webhooks the query (where ?token= lives) goes.
func redactURL(kind, raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return redacted
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if kind == "chat" {
		return u.Scheme + "://" + u.Host + "/" + redacted
	}
	if u.RawQuery != "" {
		return u.Scheme + "://" + u.Host + u.EscapedPath() + "?" + redacted
	}
	return u.String()
}

// sinkJSON shows a sink to a member of role: owners and admins, who may change it, see
// it whole; members see header names only and webhook URLs without their secrets. Every
// header value is hidden, not those whose name looks secret: X-Pass, X-Access or X-Cert
// carry credentials as well as Authorization does, and no list of names finds them all.
func (srv *Server) sinkJSON(s store.Sink, role string) map[string]any {
	c := s.Config
	if c.Kind == service.KindSlackApp {
		return srv.slackAppJSON(s)
	}
	hide := role != store.RoleOwner && role != store.RoleAdmin
	u := c.URL
	if hide {
		u = redactURL(c.Kind, c.URL)
	}
	out := map[string]any{"id": s.ID, "kind": c.Kind, "enabled": c.Enabled, "url": u,
		"created_at": ts(s.CreatedAt), "updated_at": ts(s.UpdatedAt)}
	if c.Kind == "webhook" {
		out["method"] = c.Method
		headers := make(map[string]string, len(c.Headers))
		for k, v := range c.Headers {
			if hide {
				v = redacted
			}
			headers[k] = v
		}
		out["headers"] = headers
	} else {
		out["format"] = c.Format
		out["text_template"] = c.TextTemplate
	}
	return out
}

// slackAppJSON shows a slack_app sink, to every role alike: its bot token and signing
// secret are write-only (whoever needs them again pastes them from Slack), so no answer
// carries them, not even to the owner who saved them.
func (srv *Server) slackAppJSON(s store.Sink) map[string]any {
	c := s.Config
	secret := func(v string) string {
		if v == "" {
			return ""
		}
		return service.Redacted
	}
	return map[string]any{"id": s.ID, "kind": c.Kind, "enabled": c.Enabled, "channel": c.Channel,
		"bot_token": secret(c.BotToken), "bot_token_set": c.BotToken != "",
		"signing_secret": secret(c.SigningSecret), "signing_secret_set": c.SigningSecret != "",
		"interactions_url": srv.Svc.InteractionsURL(s.ProjectID, s.ID),
		"created_at":       ts(s.CreatedAt), "updated_at": ts(s.UpdatedAt)}
}

func (s *Server) listSinks(w http.ResponseWriter, r *http.Request) {
	sinks, role, err := s.Svc.Sinks(r.Context(), currentUser(r).ID, r.PathValue("id"))
	s.respond(w, r, err, http.StatusOK, func() any {
		out := make([]map[string]any, 0, len(sinks))
		for _, sk := range sinks {
			out = append(out, s.sinkJSON(sk, role))
		}
		return map[string]any{"sinks": out}
	})
}

func (s *Server) getSink(w http.ResponseWriter, r *http.Request) {
	sk, role, err := s.Svc.Sink(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("sink_id"))
	s.respond(w, r, err, http.StatusOK, func() any { return s.sinkJSON(sk, role) })
}

func (s *Server) createSink(w http.ResponseWriter, r *http.Request) {
	var b service.SinkUpdate
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	sk, err := s.Svc.CreateSink(r.Context(), currentUser(r).ID, r.PathValue("id"), b)
	s.respond(w, r, err, http.StatusCreated, func() any { return s.sinkJSON(sk, store.RoleAdmin) })
}

func (s *Server) patchSink(w http.ResponseWriter, r *http.Request) {
	var b service.SinkUpdate
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	sk, err := s.Svc.UpdateSink(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("sink_id"), b)
	s.respond(w, r, err, http.StatusOK, func() any { return s.sinkJSON(sk, store.RoleAdmin) })
}

func (s *Server) deleteSink(w http.ResponseWriter, r *http.Request) {
	err := s.Svc.DeleteSink(r.Context(), currentUser(r).ID, r.PathValue("id"), r.PathValue("sink_id"))
	s.respond(w, r, err, http.StatusNoContent, nil)
}
