package service

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/otelcol-svc/otelcol-svc/controlplane/store"
	"github.com/otelcol-svc/otelcol-svc/internal/apierror"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
	"github.com/otelcol-svc/otelcol-svc/internal/sourceverify"
)

// VerificationSpec is a source's "verification" object as users write it: the fields of
// sourceverify.Config (same names and order, so one converts to the other), described for
// the MCP tools' schemas.
type VerificationSpec struct {
	Scheme    string `json:"scheme" jsonschema:"github, stripe, standard_webhooks, sentry, pagerduty, slack, hmac (any HMAC signature header), basic (HTTP Basic) or url_token (a secret in the ingest URL)"`
	Secret    string `json:"secret,omitempty" jsonschema:"the signing secret (or, for url_token, the token); leave it out for github, hmac, standard_webhooks and url_token to get a generated one; required for stripe, sentry, pagerduty and slack, whose secret the sender issues"`
	Username  string `json:"username,omitempty" jsonschema:"basic: the user name the sender sends"`
	Password  string `json:"password,omitempty" jsonschema:"basic: the password; leave it out to get a generated one"`
	Header    string `json:"header,omitempty" jsonschema:"hmac: the header that carries the signature, e.g. X-Signature"`
	Algorithm string `json:"algorithm,omitempty" jsonschema:"hmac: sha1, sha256 (the default) or sha512"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"hmac: hex (the default) or base64"`
	Prefix    string `json:"prefix,omitempty" jsonschema:"hmac: text before the signature in the header, e.g. sha256="`
}

// VerificationView is a source's verification as the API shows it. Secret and Password
// are set only in the answer that creates the source or rotates its secret; every other
// answer says only that one is set.
type VerificationView struct {
	Scheme    string `json:"scheme" jsonschema:"the verification scheme"`
	Secret    string `json:"secret,omitempty" jsonschema:"the signing secret or URL token: shown only now, when the source is created or its secret rotated; keep it"`
	Username  string `json:"username,omitempty" jsonschema:"basic: the user name"`
	Password  string `json:"password,omitempty" jsonschema:"basic: the password: shown only now, when the source is created or its secret rotated; keep it"`
	Header    string `json:"header,omitempty" jsonschema:"hmac: the signature header"`
	Algorithm string `json:"algorithm,omitempty" jsonschema:"hmac: the hash"`
	Encoding  string `json:"encoding,omitempty" jsonschema:"hmac: hex or base64"`
	Prefix    string `json:"prefix,omitempty" jsonschema:"hmac: text before the signature"`
	SecretSet bool   `json:"secret_set" jsonschema:"true when a secret, password or token is stored (it is never shown again; rotate it to get a new one)"`
}

// issuedBy says, for the schemes whose secret the sender makes, where the source's owner
// finds it: we cannot generate it.
var issuedBy = map[string]string{
	sourceverify.SchemeStripe:    "paste the endpoint's signing secret (whsec_...) from Stripe (Developers > Webhooks)",
	sourceverify.SchemeSentry:    "paste the integration's client secret from Sentry (Settings > Developer Settings)",
	sourceverify.SchemePagerDuty: "paste the webhook subscription's signing secret from PagerDuty",
	sourceverify.SchemeSlack:     "paste the app's signing secret from Slack (Basic Information > App Credentials)",
}

// storedHashPrefix starts what sourceverify.Stored makes of a password or URL token.
// Given as a new one it would be a credential nobody knows.
const storedHashPrefix = "hmac-sha256$"

// secretField is the config field holding the scheme's secret: the password for basic,
// else the secret (a URL token is the secret of url_token).
func secretField(c *sourceverify.Config) (name string, v *string) {
	if c.Scheme == sourceverify.SchemeBasic {
		return "password", &c.Password
	}
	return "secret", &c.Secret
}

// setSecret sets c's secret to given or, when given is empty, to a new one where the
// scheme allows; generated tells which. field prefixes the field in messages. laterOK
// lets a sender-issued secret stay unset (creating: Stripe, PagerDuty and Sentry show it
// only once they have the source's URL; until it is pasted the receiver refuses all).
func setSecret(c *sourceverify.Config, given, field string, laterOK bool) (generated bool, e *apierror.Error) {
	name, v := secretField(c)
	if given == "" {
		if hint, issued := issuedBy[c.Scheme]; issued {
			if laterOK {
				return false, nil
			}
			return false, BadBody(fmt.Sprintf("%sverification.%s is required for the %s scheme: %s", field, name, c.Scheme, hint))
		}
		given, generated = sourceverify.NewSecret(c.Scheme), true
	} else if strings.HasPrefix(given, storedHashPrefix) {
		return false, BadBody(fmt.Sprintf("%sverification.%s must be the %s itself, not a stored hash of it", field, name, name))
	}
	*v = given
	return generated, nil
}

// config checks a verification object for a new source and returns it in the clear, with
// a generated secret where none was given and the scheme allows; generated tells.
func (v VerificationSpec) config(field string) (c sourceverify.Config, generated bool, e *apierror.Error) {
	c = sourceverify.Config(v)
	if _, known := schemeKnown[c.Scheme]; known {
		_, cur := secretField(&c)
		if generated, e = setSecret(&c, *cur, field, true); e != nil {
			return sourceverify.Config{}, false, e
		}
	}
	if err := c.Validate(); err != nil {
		// Validate's messages name the field and never hold a secret.
		return sourceverify.Config{}, false, BadBody(field + err.Error())
	}
	return c, generated, nil
}

var schemeKnown = func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, s := range sourceverify.Schemes {
		m[s] = struct{}{}
	}
	return m
}()

// redacted is how every answer but create and rotate shows a (stored) verification.
func redacted(c *sourceverify.Config) *VerificationView {
	if c == nil {
		return nil
	}
	return &VerificationView{Scheme: c.Scheme, Username: c.Username, Header: c.Header, Algorithm: c.Algorithm,
		Encoding: c.Encoding, Prefix: c.Prefix, SecretSet: c.Secret != "" || c.Password != ""}
}

// showSecret adds to the create or rotate answer v what only it shows: the secret or
// password in the clear, and the ingest URL with the URL token.
func (s *Service) showSecret(v *SourceView, ingestKey string, clear *sourceverify.Config) {
	if clear == nil || v.Verification == nil {
		return
	}
	v.Verification.Secret, v.Verification.Password = clear.Secret, clear.Password
	if clear.Scheme == sourceverify.SchemeURLToken {
		v.IngestURL = s.ingestURL(ingestKey) + "/" + clear.Secret
	}
}

// RotateSourceSecret gives a source's verification a new secret, password or URL token
// (owner and admins): secret when given (required for the schemes whose secret the
// sender issues), else a generated one. The answer shows it once, as creating does; the
// mirror takes it in the same transaction, so the old one stops working within a second.
func (s *Service) RotateSourceSecret(ctx context.Context, userID, id, sourceID, secret string) (v SourceView, err error) {
	err = s.InProject(ctx, userID, id, Write, func(ctx context.Context, tx *store.Tx, p store.Project, _ string, ms *mirror.Store) error {
		v, err = s.rotateSourceSecret(ctx, tx, p, ms, sourceID, secret)
		return err
	})
	return v, err
}

func (s *Service) rotateSourceSecret(ctx context.Context, tx *store.Tx, p store.Project, ms *mirror.Store, sourceID, secret string) (SourceView, error) {
	row, err := tx.SourceByID(ctx, p.ID, sourceID)
	if errors.Is(err, store.ErrNotFound) {
		return SourceView{}, NotFound("source")
	}
	if err != nil {
		return SourceView{}, err
	}
	if row.Config.Verification == nil {
		return SourceView{}, BadBody("this source has no verification, so no secret to rotate: its senders use its API key")
	}
	clear := *row.Config.Verification
	if _, e := setSecret(&clear, secret, "", false); e != nil {
		return SourceView{}, e
	}
	if err := clear.Validate(); err != nil {
		return SourceView{}, BadBody(err.Error())
	}
	stored := clear.Stored()
	row.Config.Verification = &stored
	// The row is written (and, on PostgreSQL, locked) before the mirror: of two rotations
	// at once the second waits here, so the mirror ends with what the database holds.
	if err := tx.UpdateSourceConfig(ctx, p.ID, row.ID, row.Config); err != nil {
		return SourceView{}, err
	}
	if err := ms.PutSource(ctx, row.IngestKey, row.Config); err != nil {
		return SourceView{}, err
	}
	keys, err := tx.Keys(ctx, p.ID)
	if err != nil {
		return SourceView{}, err
	}
	prefix := ""
	for _, k := range keys {
		if k.SourceID == row.ID {
			prefix = k.Prefix
		}
	}
	v := s.sourceView(row, prefix)
	s.showSecret(&v, row.IngestKey, &clear)
	return v, nil
}
