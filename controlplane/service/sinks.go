package service

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
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
	// slack_app: the bot token and signing secret are write-only (answers show
	// Redacted); an update without them, or with Redacted, keeps them.
	BotToken      *string `json:"bot_token"`
	SigningSecret *string `json:"signing_secret"`
	Channel       *string `json:"channel"`
}

// Redacted is what answers show for a secret that is set but never shown again. An update
// sending it back (a client echoing a sink it read) keeps the secret.
const Redacted = "[redacted]"

// KindSlackApp is a Slack app destination: it posts with a bot token, one thread per
// incident, and Slack posts its buttons back signed with the app's signing secret.
const KindSlackApp = "slack_app"

// Apply sets the fields the update carries.
func (b SinkUpdate) Apply(c *mirror.Sink) {
	assign(&c.Kind, b.Kind)
	assign(&c.URL, b.URL)
	assign(&c.Method, b.Method)
	assign(&c.Format, b.Format)
	assign(&c.TextTemplate, b.TextTemplate)
	assign(&c.Enabled, b.Enabled)
	assign(&c.Headers, b.Headers)
	assign(&c.Channel, b.Channel)
	for _, f := range []struct{ dst, src *string }{{&c.BotToken, b.BotToken}, {&c.SigningSecret, b.SigningSecret}} {
		if f.src != nil && *f.src != Redacted {
			*f.dst = *f.src
		}
	}
}

var (
	// slackBotToken is what Slack issues as a bot token (xoxb-<team>-<bot>-<secret>),
	// loosely: the parts' lengths have changed over the years.
	slackBotToken = regexp.MustCompile(`^xoxb-[0-9A-Za-z-]{10,250}$`)
	// slackChannel is a channel's id (C..., private G..., or a direct message D...), or
	// its name as Slack allows them (lowercase, digits, -, _ and ., at most 80).
	slackChannel = regexp.MustCompile(`^(?:[CGD][0-9A-Z]{8,20}|#[a-z0-9][a-z0-9._-]{0,79})$`)
)

// validSigningSecret: Slack issues 32 hexadecimal characters; any 16 to 128 visible
// characters are taken, so that a later change of Slack's format is no reason to refuse.
func validSigningSecret(s string) bool {
	if len(s) < 16 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// validateSlackApp checks a slack_app sink: no URL (Slack's API address is the
// deployment's), a bot token, a signing secret and a channel.
func validateSlackApp(c *mirror.Sink) *apierror.Error {
	switch {
	case c.URL != "":
		return BadBody("url is not used by slack_app sinks: they post through Slack's API with bot_token; leave url out")
	case c.Method != "" || len(c.Headers) > 0 || c.Format != "" || c.TextTemplate != "":
		return BadBody("method, headers, format and text_template are not used by slack_app sinks")
	case c.BotToken == "":
		return BadBody("bot_token is required: the app's Bot User OAuth Token (xoxb-...), on its OAuth & Permissions page")
	case !slackBotToken.MatchString(c.BotToken):
		return BadBody("bot_token must be a Slack bot token: xoxb- followed by letters, digits and dashes (the app's Bot User OAuth Token, on its OAuth & Permissions page)")
	case c.SigningSecret == "":
		return BadBody("signing_secret is required: the app's Signing Secret, on its Basic Information page")
	case !validSigningSecret(c.SigningSecret):
		return BadBody("signing_secret must be 16 to 128 visible characters without spaces (Slack's Signing Secret is 32 hexadecimal characters, on the app's Basic Information page)")
	case c.Channel == "":
		return BadBody("channel is required: the channel's id (C0123ABCD, in the channel's details) or its name (#incidents); invite the app to it")
	case !slackChannel.MatchString(c.Channel):
		return BadBody("channel must be a channel's id such as C0123ABCD (in the channel's details) or its name such as #incidents")
	}
	return nil
}

// Headers a sink may not set: the transport's own, and ours (signature, request id).
var reservedHeaders = map[string]bool{
	"host": true, "content-length": true, "transfer-encoding": true, "connection": true,
	"x-request-id": true, "webhook-id": true, "webhook-timestamp": true, "webhook-signature": true,
}

// ValidateSink checks a sink and fills its defaults.
func ValidateSink(c *mirror.Sink) *apierror.Error {
	if c.Kind == KindSlackApp {
		return validateSlackApp(c)
	}
	if (c.Kind == "webhook" || c.Kind == "chat") && (c.BotToken != "" || c.SigningSecret != "" || c.Channel != "") {
		return BadBody("bot_token, signing_secret and channel are for slack_app sinks")
	}
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
		return BadBody(`kind must be "webhook", "chat" or "slack_app"`)
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

// InteractionsURL is where Slack posts a slack_app sink's button presses (the app's
// Interactivity Request URL): the receiver's, unversioned like its other push URLs.
func (s *Service) InteractionsURL(projectID, sinkID string) string {
	return s.ReceiverURL + "/slack/interactions/" + url.PathEscape(projectID) + "/" + url.PathEscape(sinkID)
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
	if c.URL != "" {
		if err := s.CheckDestination(ctx, c.URL); err != nil {
			return sk, BadBody("url: " + err.Error())
		}
	}
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		now := time.Now().UTC()
		c.ID = NewID("s_")
		c.Since = now
		sk = store.Sink{ID: c.ID, ProjectID: p.ID, Config: c, CreatedAt: now, UpdatedAt: now}
		if err := tx.CreateSink(ctx, sk); err != nil {
			return err
		}
		store.AuditOf(ctx).SetTarget(c.ID)
		store.AuditOf(ctx).Change(nil, sinkAudited(c))
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
		before := sk.Config
		before.Headers = maps.Clone(before.Headers)
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
		store.AuditOf(ctx).Change(sinkAudited(before), sinkAudited(sk.Config))
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
