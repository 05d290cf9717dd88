package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/components/apierror"
	"github.com/otelcol-svc/otelcol-svc/components/mirror"
	"github.com/otelcol-svc/otelcol-svc/components/outbound"
	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
)

// sinkBody is contract section 8; pointers let PATCH change only what it names.
type sinkBody struct {
	Kind         *string            `json:"kind"`
	Enabled      *bool              `json:"enabled"`
	URL          *string            `json:"url"`
	Method       *string            `json:"method"`
	Headers      *map[string]string `json:"headers"`
	Format       *string            `json:"format"`
	TextTemplate *string            `json:"text_template"`
}

func (b sinkBody) apply(c *mirror.Sink) {
	assign(&c.Kind, b.Kind)
	assign(&c.URL, b.URL)
	assign(&c.Method, b.Method)
	assign(&c.Format, b.Format)
	assign(&c.TextTemplate, b.TextTemplate)
	assign(&c.Enabled, b.Enabled)
	assign(&c.Headers, b.Headers)
}

// assign sets *dst to *src when the request carried the field (src not nil): a partial
// update leaves out what it does not change.
func assign[T any](dst, src *T) {
	if src != nil {
		*dst = *src
	}
}

// Headers a sink may not set: the transport's own, and ours (signature, request id).
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"x-request-id": true, "webhook-id": true, "webhook-timestamp": true, "webhook-signature": true,
}

// ValidateSink checks a sink and fills its defaults.
func ValidateSink(c *mirror.Sink) *apierror.Error {
	if c.URL == "" {
		return badBody("url is required")
	}
	if err := outbound.CheckURL(c.URL); err != nil {
		return badBody("url: " + err.Error())
	}
	switch c.Kind {
	case "webhook":
		if c.Method == "" {
			c.Method = http.MethodPost
		}
		c.Method = strings.ToUpper(c.Method)
		if c.Method != http.MethodPost && c.Method != http.MethodPut && c.Method != http.MethodPatch {
			return badBody("method must be POST, PUT or PATCH")
		}
		if len(c.Headers) > 32 {
			return badBody("at most 32 headers")
		}
		for k, v := range c.Headers {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n") || len(v) > 4096 {
				return badBody(fmt.Sprintf("header %q is not a valid header", k))
			}
			if reservedHeaders[strings.ToLower(k)] {
				return badBody(fmt.Sprintf("header %q is set by the service and cannot be configured", k))
			}
		}
		if c.Format != "" || c.TextTemplate != "" {
			return badBody("format and text_template are for chat sinks")
		}
	case "chat":
		if c.Format == "" {
			c.Format = "auto"
		}
		switch c.Format {
		case "slack", "discord", "teams", "auto":
		default:
			return badBody(`format must be "slack", "discord", "teams" or "auto"`)
		}
		if len(c.TextTemplate) > 4096 {
			return badBody("text_template must be at most 4096 characters")
		}
		if strings.Count(c.TextTemplate, "{") != strings.Count(c.TextTemplate, "}") {
			return badBody("text_template has an unclosed {placeholder}")
		}
		if c.Method != "" || len(c.Headers) > 0 {
			return badBody("method and headers are for webhook sinks")
		}
	default:
		return badBody(`kind must be "webhook" or "chat"`)
	}
	return nil
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// redacted replaces a secret a reader may not see.
const redacted = "[redacted]"

// secretHeader tells a header that carries a credential: Authorization, cookies, and
// every name that says token, secret, key, auth, signature, password or session.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	for _, w := range []string{"token", "secret", "key", "auth", "signature", "sign", "password", "passwd", "session", "credential", "jwt", "bearer"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

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
// it whole; members see it without secret headers and webhook URL secrets.
func sinkJSON(s store.Sink, role string) map[string]any {
	c := s.Config
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
			if hide && secretHeader(k) {
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

func findSink(ctx context.Context, tx *store.Tx, projectID, id string) (store.Sink, error) {
	sinks, err := tx.Sinks(ctx, projectID)
	if err != nil {
		return store.Sink{}, err
	}
	for _, s := range sinks {
		if s.ID == id {
			return s, nil
		}
	}
	return store.Sink{}, notFound("sink")
}

func (s *Server) listSinks(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store, rep *reply) error {
		sinks, err := tx.Sinks(ctx, p.ID)
		if err != nil {
			return err
		}
		out := make([]map[string]any, 0, len(sinks))
		for _, sk := range sinks {
			out = append(out, sinkJSON(sk, role))
		}
		rep.set(http.StatusOK, map[string]any{"sinks": out})
		return nil
	})
}

func (s *Server) getSink(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, read, func(ctx context.Context, tx *store.Tx, p store.Project, role string, _ *mirror.Store, rep *reply) error {
		sk, err := findSink(ctx, tx, p.ID, r.PathValue("sink_id"))
		if err != nil {
			return err
		}
		rep.set(http.StatusOK, sinkJSON(sk, role))
		return nil
	})
}

func (s *Server) createSink(w http.ResponseWriter, r *http.Request) {
	var b sinkBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	c := mirror.Sink{Enabled: true}
	b.apply(&c)
	if e := ValidateSink(&c); e != nil {
		fail(w, e)
		return
	}
	if err := s.checkDestination(r.Context(), c.URL); err != nil {
		fail(w, badBody("url: "+err.Error()))
		return
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		now := time.Now().UTC()
		c.ID = newID("s_")
		c.Since = now
		sk := store.Sink{ID: c.ID, ProjectID: p.ID, Config: c, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateSink(ctx, sk); err != nil {
			return err
		}
		return s.saveProject(ctx, tx, ms, p, func(store.Project) { rep.set(http.StatusCreated, sinkJSON(sk, store.RoleAdmin)) })
	})
}

func (s *Server) patchSink(w http.ResponseWriter, r *http.Request) {
	var b sinkBody
	if e := decode(r, &b); e != nil {
		fail(w, e)
		return
	}
	if b.URL != nil && *b.URL != "" {
		if err := s.checkDestination(r.Context(), *b.URL); err != nil {
			fail(w, badBody("url: "+err.Error()))
			return
		}
	}
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		sk, err := findSink(ctx, tx, p.ID, r.PathValue("sink_id"))
		if err != nil {
			return err
		}
		if b.Kind != nil && *b.Kind != sk.Config.Kind {
			return badBody("kind cannot change; create another sink")
		}
		wasEnabled := sk.Config.Enabled
		b.apply(&sk.Config)
		if e := ValidateSink(&sk.Config); e != nil {
			return e
		}
		sk.UpdatedAt = time.Now().UTC()
		if sk.Config.Enabled && !wasEnabled {
			// Turned back on: deliver what arrives from now, not what came while it was off.
			sk.Config.Since = sk.UpdatedAt
		}
		if err := tx.UpdateSink(ctx, sk); err != nil {
			return err
		}
		return s.saveProject(ctx, tx, ms, p, func(store.Project) { rep.set(http.StatusOK, sinkJSON(sk, store.RoleAdmin)) })
	})
}

func (s *Server) deleteSink(w http.ResponseWriter, r *http.Request) {
	s.onProject(w, r, write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store, rep *reply) error {
		err := tx.DeleteSink(ctx, p.ID, r.PathValue("sink_id"))
		if errors.Is(err, store.ErrNotFound) {
			return notFound("sink")
		}
		if err != nil {
			return err
		}
		return s.saveProject(ctx, tx, ms, p, func(store.Project) { rep.set(http.StatusNoContent, nil) })
	})
}
