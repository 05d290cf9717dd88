package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/envelope"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourcepreset"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
	"github.com/otelcol-svc/otelcol-svc/internal/textfmt"
)

// Limits of a push source's settings.
const (
	maxLabels       = 32
	maxLabelName    = 64
	maxPathLen      = 256
	maxEventTypeLen = 200
	maxTemplateLen  = 4096
)

// SourceSpec is a push source's settings as users write them (docs/contract.md#section-9). The
// API decodes request bodies into it and the MCP tools take it as input, so both check
// the same rules (validate).
type SourceSpec struct {
	Name           string            `json:"name,omitempty" jsonschema:"the source's name, 1 to 100 characters, unique in the project; records carry it as _source"`
	Connector      string            `json:"connector,omitempty" jsonschema:"the only connector is webhook (the default): the source gets a URL that takes JSON posts"`
	EventType      string            `json:"event_type,omitempty" jsonschema:"fixed event type of the records (_event_type), used when event_type_field is unset or missing in a payload; default webhook_event"`
	EventTypeField string            `json:"event_type_field,omitempty" jsonschema:"dot path of the payload field holding the event type, e.g. action or event.kind"`
	TextTemplate   string            `json:"text_template,omitempty" jsonschema:"display text of each record, with {field} and {a.b.c} placeholders over payload fields, e.g. {repo.name}: {action}; {{ and }} write literal braces"`
	EventTimeField string            `json:"event_time_field,omitempty" jsonschema:"dot path of the payload field holding the event's time (ISO 8601 or unix time); default: the time received"`
	Labels         map[string]string `json:"labels,omitempty" jsonschema:"labels of each record: label name (letters, digits, _ . -) to the dot path of the payload field it copies, e.g. {\"repo\": \"repo.name\"}; at most 32"`
	Preset         string            `json:"preset,omitempty" jsonschema:"a sender whose webhook bodies the source reads with that sender's own event type, time, text, labels and delivery id: alertmanager or grafana (one record per alert), github, stripe, sentry, pagerduty, cloudevents; empty: each posted object is one record"`
	Verification   *VerificationSpec `json:"verification,omitempty" jsonschema:"how the receiver checks that a post comes from the sender, for senders that cannot send an API key: a signature (github, stripe, standard_webhooks, sentry, pagerduty, slack, hmac), HTTP Basic (basic) or a token in the URL (url_token)"`
}

// SourceView is a source as the API and the tools show it. APIKey is set only in the
// answer that creates the source.
type SourceView struct {
	ID             string            `json:"id" jsonschema:"the source's id"`
	Name           string            `json:"name"`
	Connector      string            `json:"connector"`
	EventType      string            `json:"event_type"`
	EventTypeField string            `json:"event_type_field"`
	TextTemplate   string            `json:"text_template"`
	EventTimeField string            `json:"event_time_field"`
	Labels         map[string]string `json:"labels"`
	IngestKey      string            `json:"ingest_key" jsonschema:"the key in the ingest URL"`
	IngestURL      string            `json:"ingest_url" jsonschema:"where to POST payloads: one JSON object, a JSON array of objects, or NDJSON"`
	APIKeyPrefix   string            `json:"api_key_prefix" jsonschema:"first characters of the source's ingest-scoped API key; empty when the key was revoked"`
	CreatedAt      string            `json:"created_at"`
	APIKey         string            `json:"api_key,omitempty" jsonschema:"the ingest-scoped API key, sent as Authorization: Bearer <api_key>; shown only when the source is created"`
	Preset         string            `json:"preset" jsonschema:"the sender whose bodies the source reads (alertmanager, grafana, github, stripe, sentry, pagerduty, cloudevents); empty for none"`
	Verification   *VerificationView `json:"verification,omitempty" jsonschema:"how the receiver checks the sender; its secret, password or URL token is shown only in the answer that creates the source or rotates its secret"`
}

func (s *Service) ingestURL(ingestKey string) string {
	return s.ReceiverURL + "/ingest/" + ingestKey
}

func (s *Service) sourceView(src store.Source, keyPrefix string) SourceView {
	c := src.Config
	labels := c.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	created := ""
	if !src.CreatedAt.IsZero() {
		created = src.CreatedAt.UTC().Format(time.RFC3339)
	}
	return SourceView{ID: src.ID, Name: c.Name, Connector: c.Connector, EventType: c.EventType,
		EventTypeField: c.EventTypeField, TextTemplate: c.TextTemplate, EventTimeField: c.EventTimeField,
		Labels: labels, IngestKey: src.IngestKey, IngestURL: s.ingestURL(src.IngestKey), APIKeyPrefix: keyPrefix,
		CreatedAt: created, Preset: c.Preset, Verification: redacted(c.Verification)}
}

// newIngestKey returns "in_" and 32 lowercase hex characters (128 random bits): safe in a
// URL path and a NATS KV key.
func newIngestKey() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "in_" + hex.EncodeToString(b[:])
}

// Validate checks a source's settings and returns them with defaults filled. field
// prefixes every field name in messages ("" or "source."). A test may leave the name out.
// A verification whose scheme lets us make the secret (password, URL token) and that has
// none gets a new one; the result's Verification is in the clear, as the sender needs it:
// only its Stored() form may be kept.
func (spec SourceSpec) Validate(field string, nameRequired bool) (mirror.Source, *apierror.Error) {
	src, _, e := spec.validate(field, nameRequired)
	return src, e
}

// validate is Validate, and tells whether it made the verification's secret.
func (spec SourceSpec) validate(field string, nameRequired bool) (mirror.Source, bool, *apierror.Error) {
	bad := func(name, format string, args ...any) (mirror.Source, bool, *apierror.Error) {
		return mirror.Source{}, false, BadBody(field + name + ": " + fmt.Sprintf(format, args...))
	}
	src := mirror.Source{Connector: spec.Connector, EventType: strings.TrimSpace(spec.EventType),
		EventTypeField: spec.EventTypeField, TextTemplate: spec.TextTemplate, EventTimeField: spec.EventTimeField}

	name := strings.TrimSpace(spec.Name)
	switch {
	case name == "" && nameRequired:
		return bad("name", "is required: name the source, e.g. github")
	case name == "":
		name = "test"
	case utf8.RuneCountInString(name) > 100 || hasControl(name):
		return bad("name", "must be 1 to 100 printable characters")
	}
	src.Name = name

	if src.Connector == "" {
		src.Connector = "webhook"
	}
	if src.Connector != "webhook" {
		return bad("connector", `must be "webhook" (the only connector)`)
	}
	if src.EventType == "" {
		src.EventType = envelope.DefaultEventType
	}
	if utf8.RuneCountInString(src.EventType) > maxEventTypeLen || hasControl(src.EventType) {
		return bad("event_type", "must be at most %d printable characters", maxEventTypeLen)
	}
	if src.EventTypeField != "" {
		if err := checkPath(src.EventTypeField); err != nil {
			return bad("event_type_field", "%v", err)
		}
	}
	if src.EventTimeField != "" {
		if err := checkPath(src.EventTimeField); err != nil {
			return bad("event_time_field", "%v", err)
		}
	}
	if err := checkTemplate(src.TextTemplate); err != nil {
		return bad("text_template", "%v", err)
	}
	if len(spec.Labels) > maxLabels {
		return bad("labels", "at most %d labels, not %d", maxLabels, len(spec.Labels))
	}
	if len(spec.Labels) > 0 {
		src.Labels = make(map[string]string, len(spec.Labels))
	}
	for label, path := range spec.Labels {
		if !validLabelName(label) {
			return bad(fmt.Sprintf("labels[%q]", label), "a label name is 1 to %d letters, digits, _, . or -", maxLabelName)
		}
		if path == "" {
			return bad(fmt.Sprintf("labels[%q]", label), "name the payload field to copy, e.g. repo.name")
		}
		if err := checkPath(path); err != nil {
			return bad(fmt.Sprintf("labels[%q]", label), "%v", err)
		}
		src.Labels[label] = path
	}
	if spec.Preset != "" {
		if !sourcepreset.Valid(spec.Preset) {
			return bad("preset", "%q is not a preset: one of %s", spec.Preset, strings.Join(sourcepreset.Names(), ", "))
		}
		src.Preset = spec.Preset
	}
	generated := false
	if spec.Verification != nil {
		c, gen, e := spec.Verification.config(field)
		if e != nil {
			return mirror.Source{}, false, e
		}
		src.Verification, generated = &c, gen
	}
	return src, generated, nil
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

func validLabelName(n string) bool {
	if n == "" || len(n) > maxLabelName {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// checkPath checks a dot path to a payload field (a.b.c; a numeric segment indexes an
// array), as internal/textfmt resolves it.
func checkPath(p string) error {
	switch {
	case len(p) > maxPathLen:
		return fmt.Errorf("a field path is at most %d characters", maxPathLen)
	case strings.TrimSpace(p) != p:
		return fmt.Errorf("the field path %q starts or ends with a space", p)
	case hasControl(p) || strings.ContainsAny(p, "{}"):
		return fmt.Errorf("the field path %q holds a control character or a brace", p)
	}
	for _, seg := range strings.Split(p, ".") {
		if seg == "" {
			return fmt.Errorf("the field path %q has an empty segment: write a.b.c", p)
		}
	}
	return nil
}

// checkTemplate checks a text template the way internal/textfmt renders it: {path}
// placeholders, {{ and }} for literal braces, nothing left open.
func checkTemplate(tpl string) error {
	if utf8.RuneCountInString(tpl) > maxTemplateLen {
		return fmt.Errorf("at most %d characters", maxTemplateLen)
	}
	pos := func(i int) int { return utf8.RuneCountInString(tpl[:i]) + 1 }
	for i := 0; i < len(tpl); {
		c := tpl[i]
		next := byte(0)
		if i+1 < len(tpl) {
			next = tpl[i+1]
		}
		switch {
		case c == '{' && next == '{', c == '}' && next == '}':
			i += 2
		case c == '{':
			end := strings.IndexByte(tpl[i+1:], '}')
			if end < 0 || strings.IndexByte(tpl[i+1:i+1+end], '{') >= 0 {
				return fmt.Errorf("the { at character %d is not closed: write {field}, or {{ for a literal brace", pos(i))
			}
			i += end + 2
		case c == '}':
			return fmt.Errorf("the } at character %d closes nothing: write }} for a literal brace", pos(i))
		default:
			i++
		}
	}
	for _, ph := range textfmt.Placeholders(tpl) {
		if ph == "" {
			return errors.New("empty placeholder {}: name a payload field, e.g. {action}")
		}
		if err := checkPath(ph); err != nil {
			return fmt.Errorf("placeholder {%s}: %v", ph, err)
		}
	}
	return nil
}

// Sources lists a project's push sources.
func (s *Service) Sources(ctx context.Context, userID, id string) (out []SourceView, err error) {
	err = s.InProject(ctx, userID, id, Read, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, _ *mirror.Store) error {
		out, err = s.listSources(ctx, tx, p)
		return err
	})
	return out, err
}

// Source returns one of a project's push sources.
func (s *Service) Source(ctx context.Context, userID, id, sourceID string) (SourceView, error) {
	all, err := s.Sources(ctx, userID, id)
	if err != nil {
		return SourceView{}, err
	}
	for _, v := range all {
		if v.ID == sourceID {
			return v, nil
		}
	}
	return SourceView{}, NotFound("source")
}

// CreateSource stores a source, validated by SourceSpec.Validate, with its ingest key and
// ingest-scoped API key (owner and admins).
func (s *Service) CreateSource(ctx context.Context, userID, id string, src mirror.Source) (v SourceView, err error) {
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		v, err = s.createSource(ctx, tx, p, ms, src)
		store.AuditOf(ctx).SetTarget(v.ID)
		store.AuditOf(ctx).Change(nil, sourceAudited(v))
		return err
	})
	return v, err
}

// DeleteSource removes a source and its keys (owner and admins).
func (s *Service) DeleteSource(ctx context.Context, userID, id, sourceID string) error {
	return s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		return deleteSource(ctx, tx, p, ms, sourceID)
	})
}

func (s *Service) listSources(ctx context.Context, tx *store.Tx, p store.Project) ([]SourceView, error) {
	sources, err := tx.Sources(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	keys, err := tx.Keys(ctx, p.ID)
	if err != nil {
		return nil, err
	}
	prefix := map[string]string{}
	for _, k := range keys {
		if k.SourceID != "" {
			prefix[k.SourceID] = k.Prefix
		}
	}
	out := make([]SourceView, 0, len(sources))
	for _, src := range sources {
		out = append(out, s.sourceView(src, prefix[src.ID]))
	}
	return out, nil
}

// createSource stores a validated source with its ingest key and ingest-scoped API key,
// and publishes both to the mirror (the transaction commits only if the mirror took them).
func (s *Service) createSource(ctx context.Context, tx *store.Tx, p store.Project, ms *mirror.Store, src mirror.Source) (SourceView, error) {
	now := time.Now().UTC()
	// The sender gets the verification's secret in the clear, once, in this answer; the
	// database and the mirror keep only its Stored() form.
	var clear *sourceverify.Config
	if src.Verification != nil {
		c := *src.Verification
		stored := c.Stored()
		clear, src.Verification = &c, &stored
	}
	src.ID = NewID("src_")
	src.ProjectID = p.ID
	row := store.Source{ID: src.ID, ProjectID: p.ID, IngestKey: newIngestKey(), Config: src, CreatedAt: now}
	secret := apikey.Generate(apikey.KindIngest)
	k := store.Key{ID: NewID("k_"), ProjectID: p.ID, Name: "source " + src.Name, Prefix: apikey.Prefix(secret),
		Hash: apikey.Hash(secret), Scope: mirror.ScopeIngest, SourceID: src.ID, CreatedAt: now}
	if err := tx.CreateSource(ctx, row); errors.Is(err, store.ErrConflict) {
		return SourceView{}, apierror.New(http.StatusConflict, apierror.Conflict,
			fmt.Sprintf("this project has a source named %q; choose another name or delete that source", src.Name))
	} else if err != nil {
		return SourceView{}, err
	}
	if err := tx.CreateKey(ctx, k); err != nil {
		return SourceView{}, err
	}
	if err := ms.PutSource(ctx, row.IngestKey, src); err != nil {
		return SourceView{}, err
	}
	if err := ms.PutKey(ctx, k.Hash, mirrorKey(k, p.OwnerID)); err != nil {
		return SourceView{}, err
	}
	v := s.sourceView(row, k.Prefix)
	v.APIKey = secret // the only time it is shown
	s.showSecret(&v, row.IngestKey, clear)
	return v, nil
}

// deleteSource removes a source and its keys, from the database and the mirror.
func deleteSource(ctx context.Context, tx *store.Tx, p store.Project, ms *mirror.Store, id string) error {
	src, keys, err := tx.DeleteSource(ctx, p.ID, id)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound("source")
	}
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := ms.DeleteKey(ctx, k.Hash); err != nil {
			return err
		}
	}
	if err := ms.DeleteSource(ctx, src.IngestKey); err != nil {
		return err
	}
	for _, k := range keys {
		_ = ms.ForgetKeyUsage(ctx, k.ID)
	}
	return nil
}
