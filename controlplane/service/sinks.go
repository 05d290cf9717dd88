package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/outbound"
)

// SinkUpdate is docs/contract.md#section-8; pointers let an update change only what it names.
type SinkUpdate struct {
	Kind         *string            `json:"kind"`
	Enabled      *bool              `json:"enabled"`
	URL          *string            `json:"url"`
	Method       *string            `json:"method"`
	Headers      *map[string]string `json:"headers"`
	Format       *string            `json:"format"`
	TextTemplate *string            `json:"text_template"`
}

// Apply sets the fields the update carries.
func (b SinkUpdate) Apply(c *mirror.Sink) {
	assign(&c.Kind, b.Kind)
	assign(&c.URL, b.URL)
	assign(&c.Method, b.Method)
	assign(&c.Format, b.Format)
	assign(&c.TextTemplate, b.TextTemplate)
	assign(&c.Enabled, b.Enabled)
	assign(&c.Headers, b.Headers)
}

// Headers a sink may not set: the transport's own, and ours (signature, request id).
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"x-request-id": true, "webhook-id": true, "webhook-timestamp": true, "webhook-signature": true,
}

// ValidateSink checks a sink and fills its defaults.
func ValidateSink(c *mirror.Sink) *apierror.Error {
	if c.URL == "" {
		return BadBody("url is required")
	}
	if err := outbound.CheckURL(c.URL); err != nil {
		return BadBody("url: " + err.Error())
	}
	switch c.Kind {
	case "webhook":
		if c.Method == "" {
			c.Method = http.MethodPost
		}
		c.Method = strings.ToUpper(c.Method)
		if c.Method != http.MethodPost && c.Method != http.MethodPut && c.Method != http.MethodPatch {
			return BadBody("method must be POST, PUT or PATCH")
		}
		if len(c.Headers) > 32 {
			return BadBody("at most 32 headers")
		}
		for k, v := range c.Headers {
			if !validHeaderName(k) || strings.ContainsAny(v, "\r\n") || len(v) > 4096 {
				return BadBody(fmt.Sprintf("header %q is not a valid header", k))
			}
			if reservedHeaders[strings.ToLower(k)] {
				return BadBody(fmt.Sprintf("header %q is set by the service and cannot be configured", k))
			}
		}
		if c.Format != "" || c.TextTemplate != "" {
			return BadBody("format and text_template are for chat sinks")
		}
	case "chat":
		if c.Format == "" {
			c.Format = "auto"
		}
		switch c.Format {
		case "slack", "discord", "teams", "auto":
		default:
			return BadBody(`format must be "slack", "discord", "teams" or "auto"`)
		}
		if len(c.TextTemplate) > 4096 {
			return BadBody("text_template must be at most 4096 characters")
		}
		if strings.Count(c.TextTemplate, "{") != strings.Count(c.TextTemplate, "}") {
			return BadBody("text_template has an unclosed {placeholder}")
		}
		if c.Method != "" || len(c.Headers) > 0 {
			return BadBody("method and headers are for webhook sinks")
		}
	default:
		return BadBody(`kind must be "webhook" or "chat"`)
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

// FindSink returns a project's sink.
func FindSink(ctx context.Context, tx *store.Tx, projectID, id string) (store.Sink, error) {
	sinks, err := tx.Sinks(ctx, projectID)
	if err != nil {
		return store.Sink{}, err
	}
	for _, s := range sinks {
		if s.ID == id {
			return s, nil
		}
	}
	return store.Sink{}, NotFound("sink")
}

// Sinks lists a project's sinks, with the user's role (which decides what they see).
func (s *Service) Sinks(ctx context.Context, userID, id string) (sinks []store.Sink, role string, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		role = r
		sinks, err = tx.Sinks(ctx, p.ID)
		return err
	})
	return sinks, role, err
}

// Sink returns one of a project's sinks, with the user's role.
func (s *Service) Sink(ctx context.Context, userID, id, sinkID string) (sk store.Sink, role string, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, r string, _ *mirror.Store) error {
		role = r
		sk, err = FindSink(ctx, tx, p.ID, sinkID)
		return err
	})
	return sk, role, err
}

// CreateSink adds a destination; it receives results stored from now on.
func (s *Service) CreateSink(ctx context.Context, userID, id string, b SinkUpdate) (sk store.Sink, err error) {
	c := mirror.Sink{Enabled: true}
	b.Apply(&c)
	if e := ValidateSink(&c); e != nil {
		return sk, e
	}
	if err := s.CheckDestination(ctx, c.URL); err != nil {
		return sk, BadBody("url: " + err.Error())
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		now := time.Now().UTC()
		c.ID = NewID("s_")
		c.Since = now
		sk = store.Sink{ID: c.ID, ProjectID: p.ID, Config: c, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateSink(ctx, sk); err != nil {
			return err
		}
		return saveProject(ctx, tx, ms, &p)
	})
	return sk, err
}

// UpdateSink changes the fields b carries; its kind cannot change.
func (s *Service) UpdateSink(ctx context.Context, userID, id, sinkID string, b SinkUpdate) (sk store.Sink, err error) {
	if b.URL != nil && *b.URL != "" {
		if err := s.CheckDestination(ctx, *b.URL); err != nil {
			return sk, BadBody("url: " + err.Error())
		}
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		sk, err = FindSink(ctx, tx, p.ID, sinkID)
		if err != nil {
			return err
		}
		if b.Kind != nil && *b.Kind != sk.Config.Kind {
			return BadBody("kind cannot change; create another sink")
		}
		wasEnabled := sk.Config.Enabled
		b.Apply(&sk.Config)
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
		return saveProject(ctx, tx, ms, &p)
	})
	return sk, err
}

// DeleteSink removes a destination.
func (s *Service) DeleteSink(ctx context.Context, userID, id, sinkID string) error {
	return s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		err := tx.DeleteSink(ctx, p.ID, sinkID)
		if errors.Is(err, store.ErrNotFound) {
			return NotFound("sink")
		}
		if err != nil {
			return err
		}
		return saveProject(ctx, tx, ms, &p)
	})
}
