package projectauthextension

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelcol-svc/otelcol-svc/internal/apikey"
	"github.com/otelcol-svc/otelcol-svc/internal/collector/principal"
	"github.com/otelcol-svc/otelcol-svc/internal/consoletoken"
	"github.com/otelcol-svc/otelcol-svc/internal/mirror"
)

// Messages of push-ingest refusals: what the sender should do.
const (
	msgIngestMissing = "this ingest URL needs authentication: send the source's ingest key as `Authorization: Bearer osi_...`, or the instance's service ingest token as X-Service-Token"
	msgIngestProject = "a project API key (osk_...) cannot post to an ingest URL: send this source's ingest key (osi_..., shown when the source was created) as `Authorization: Bearer`"
	msgIngestOther   = "this ingest key belongs to another source: each source's ingest key only opens that source's ingest URL"
	msgIngestUnknown = "the ingest key is not valid: it is unknown or revoked (deleting a source revokes its key)"
	msgIngestXAPIKey = "send the source's ingest key as `Authorization: Bearer <key>`, not in X-API-Key"
	msgServiceToken  = "the service ingest token is not valid for this instance"
	msgNoServiceTok  = "this instance has no service ingest token (SERVICE_INGEST_TOKEN is unset); send the source's ingest key as `Authorization: Bearer osi_...`"
	msgUnknownSource = "no push source has this ingest URL: check the URL, or the source was deleted"
)

// AuthenticateIngest authorizes a POST to the ingest URL of ingestKey
// (docs/contract.md#section-5) and returns the context carrying the source's project as the principal (scope
// ingest, with the source id) and the source. Accepted when any of these holds: the
// Bearer token is this source's ingest-scoped key; the service token is configured and
// sent as X-Service-Token or Bearer; push-ingest auth is off. Errors wrap
// principal.ErrNotReady, ErrNotFound (unknown ingest key), ErrMissingKey, ErrInvalidKey or
// ErrInvalidToken, with a message for the sender (principal.Message).
//
// A source with a verification (src.Verification, docs/contract.md#section-5) needs no
// header credential: its requests are let through with the principal and the source, whose
// Verification the caller must then check against the body (sourceverify.Verify) before
// storing anything, and report with CountIngestVerification. A valid header credential of
// the source (its osi_ key, the service token) still opens it, for an operator testing with
// curl: the source is then returned with Verification nil, as there is nothing left to
// check. Push-ingest auth off does not switch a source's verification off: its owner asked
// for it.
func (a *authenticator) AuthenticateIngest(ctx context.Context, headers map[string][]string, ingestKey string) (context.Context, mirror.Source, error) {
	src, p, err := a.ingest(headers, ingestKey)
	deferred := false
	if src.Verification != nil && p.ProjectID != "" {
		switch {
		case err == nil && !a.cfg.PushIngest.authOff():
			src.Verification = nil
		case err == nil, errors.Is(err, principal.ErrMissingKey), errors.Is(err, principal.ErrInvalidKey), errors.Is(err, principal.ErrInvalidToken):
			// Whatever the headers held, the body's signature decides.
			deferred, err = true, nil
		}
	}
	if !deferred {
		// A deferred request is counted once its verification is done.
		a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome(err)), attribute.String("surface", "push_ingest")))
	}
	if err != nil {
		return ctx, mirror.Source{}, err
	}
	return principal.NewContext(ctx, p), src, nil
}

// CountIngestVerification counts the outcome of a push request that AuthenticateIngest let
// through for its source's verification: err is what sourceverify.Verify returned (nil:
// accepted, outcome ok; else outcome signature_invalid), beside the other push-ingest
// authentication outcomes.
func (a *authenticator) CountIngestVerification(ctx context.Context, err error) {
	o := "ok"
	if err != nil {
		o = "signature_invalid"
	}
	a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", o), attribute.String("surface", "push_ingest")))
}

func (a *authenticator) ingest(headers map[string][]string, ingestKey string) (mirror.Source, principal.Principal, error) {
	if !a.ready() {
		return mirror.Source{}, principal.Principal{}, principal.ErrNotReady
	}
	src, ok := a.cache.Source(ingestKey)
	if !ok || src.ProjectID == "" {
		return mirror.Source{}, principal.Principal{}, principal.Refuse(principal.ErrNotFound, msgUnknownSource)
	}
	p := principal.Principal{ProjectID: src.ProjectID, Scope: mirror.ScopeIngest, SourceID: src.ID}
	if proj, ok := a.cache.Project(src.ProjectID); ok {
		p.AccountID = proj.AccountID
	}
	if a.cfg.PushIngest.authOff() {
		return src, p, nil
	}
	bearerTok := bearer(lookup(headers, "authorization"))
	serviceTok := lookup(headers, "x-service-token")
	if bearerTok == "" && serviceTok == "" {
		if lookup(headers, "x-api-key") != "" {
			return src, p, principal.Refuse(principal.ErrMissingKey, msgIngestXAPIKey)
		}
		return src, p, principal.Refuse(principal.ErrMissingKey, msgIngestMissing)
	}
	// Any one valid credential is enough; when none is, the first presented one explains.
	var refusal error
	if bearerTok != "" {
		if a.serviceToken(bearerTok) {
			return src, p, nil
		}
		e, ok := a.cache.Key(apikey.Hash(bearerTok))
		switch {
		case ok && e.Scope == mirror.ScopeIngest && e.SourceID == src.ID && e.ProjectID == src.ProjectID:
			a.noteUse(e.KeyID)
			p.KeyID = e.KeyID
			if e.AccountID != "" {
				p.AccountID = e.AccountID
			}
			return src, p, nil
		case ok && e.Scope == mirror.ScopeProject:
			refusal = principal.Refuse(principal.ErrInvalidKey, msgIngestProject)
		case ok && e.Scope == mirror.ScopeIngest:
			refusal = principal.Refuse(principal.ErrInvalidKey, msgIngestOther)
		default:
			refusal = principal.Refuse(principal.ErrInvalidKey, msgIngestUnknown)
		}
	}
	if serviceTok != "" {
		if a.serviceToken(serviceTok) {
			return src, p, nil
		}
		if refusal == nil {
			msg := msgServiceToken
			if a.cfg.PushIngest.ServiceToken == "" {
				msg = msgNoServiceTok
			}
			refusal = principal.Refuse(principal.ErrInvalidToken, msg)
		}
	}
	return src, p, refusal
}

// serviceToken reports whether tok is the configured service ingest token, in constant
// time (hashing first makes the comparison independent of the lengths too).
func (a *authenticator) serviceToken(tok string) bool {
	want := strings.TrimSpace(string(a.cfg.PushIngest.ServiceToken))
	if want == "" {
		return false
	}
	x, y := sha256.Sum256([]byte(tok)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(x[:], y[:]) == 1
}

// Messages of console read refusals.
const (
	msgConsoleMissing   = "send the project's API key as X-API-Key, or a console token from the control plane as `Authorization: Bearer <token>`"
	msgConsoleNoProject = "no such project, or your credentials do not open it"
	msgConsoleIngestKey = "an ingest key (osi_...) only posts to its source's ingest URL; read with the project's API key or a console token"
	msgConsoleNoKeys    = "console tokens cannot be checked yet: the control plane has not published its token keys; retry in a moment"
	msgConsoleOldGrant  = "the console token was issued for an earlier membership of this project; get a new one from the control plane"
	msgConsoleRevoked   = "the console token was minted with a credential that has since been revoked or logged out; sign in again and get a new one"
)

// AuthenticateConsole authorizes a read of projectID's records through the console read
// API: the project's API key (X-API-Key, or a Bearer that is not a JWT) or a console token
// (a Bearer JWT, internal/consoletoken) for this project. A credential for another
// project is refused as principal.ErrNotFound, exactly like a project that does not exist.
func (a *authenticator) AuthenticateConsole(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	p, err := a.console(headers, projectID)
	a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome(err)), attribute.String("surface", "console")))
	if err != nil {
		return ctx, err
	}
	return principal.NewContext(ctx, p), nil
}

func (a *authenticator) console(headers map[string][]string, projectID string) (principal.Principal, error) {
	key := lookup(headers, "x-api-key")
	tok := bearer(lookup(headers, "authorization"))
	if key == "" && tok == "" {
		return principal.Principal{}, principal.Refuse(principal.ErrMissingKey, msgConsoleMissing)
	}
	if !a.ready() {
		return principal.Principal{}, principal.ErrNotReady
	}
	if key == "" && looksLikeJWT(tok) {
		c, err := consoletoken.Verify(a.cache.ConsoleKeys(), tok, time.Now())
		switch {
		case errors.Is(err, consoletoken.ErrNoKeys):
			return principal.Principal{}, principal.Refuse(principal.ErrNotReady, msgConsoleNoKeys)
		case err != nil:
			return principal.Principal{}, principal.Refuse(principal.ErrInvalidToken, "the console token is not valid or has expired; get a new one from the control plane")
		case c.ProjectID != projectID:
			return principal.Principal{}, principal.Refuse(principal.ErrNotFound, msgConsoleNoProject)
		}
		// A token stays valid for up to an hour, but access ends with the membership it
		// was issued under: the mirror, not the token, says whether the project still
		// exists and the user is still a member. Gone, or never a member: answered as a
		// stranger is. A member again since: a new token is needed.
		proj, ok := a.cache.Project(c.ProjectID)
		grant, member := proj.Members[c.UserID]
		if !ok || !member {
			return principal.Principal{}, principal.Refuse(principal.ErrNotFound, msgConsoleNoProject)
		}
		if grant != c.Grant {
			return principal.Principal{}, principal.Refuse(principal.ErrInvalidToken, msgConsoleOldGrant)
		}
		// Nor does it outlive the personal access token, session or OAuth grant that
		// minted it.
		if c.Credential != "" && a.cache.Revoked(c.Credential) {
			return principal.Principal{}, principal.Refuse(principal.ErrInvalidToken, msgConsoleRevoked)
		}
		return principal.Principal{ProjectID: c.ProjectID, Scope: principal.ScopeConsole, KeyID: consoleUserPrefix + c.UserID, Email: c.Email,
			ReadOnly: c.ReadOnly}, nil
	}
	if key == "" {
		key = tok
	}
	e, ok := a.cache.Key(apikey.Hash(key))
	switch {
	case !ok:
		return principal.Principal{}, principal.Refuse(principal.ErrInvalidKey, "the API key is not valid: it is unknown or revoked")
	case e.Scope != mirror.ScopeProject:
		return principal.Principal{}, principal.Refuse(principal.ErrInvalidKey, msgConsoleIngestKey)
	case e.ProjectID != projectID:
		return principal.Principal{}, principal.Refuse(principal.ErrNotFound, msgConsoleNoProject)
	case !e.Allows(mirror.PermRead):
		return principal.Principal{}, insufficientScope(mirror.PermRead)
	}
	a.noteUse(e.KeyID)
	return principal.Principal{ProjectID: e.ProjectID, KeyID: e.KeyID, AccountID: e.AccountID, Scope: e.Scope}, nil
}

// consoleUserPrefix starts the KeyID of a console token's principal; the user id follows.
const consoleUserPrefix = "user:"

// looksLikeJWT tells a compact JWT (three base64url parts, a JSON header) from an API key.
func looksLikeJWT(s string) bool {
	return strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2
}

// JetStream is the configmirror extension's connection to the NATS that holds the mirror
// and the streams; the ingest receiver reads recent records through it for the console.
// Nil before Start.
func (a *authenticator) JetStream() jetstream.JetStream { return a.js }

// Roles that may change a project's data-plane state through the console (replay).
const (
	roleOwner = "owner"
	roleAdmin = "admin"
)

const (
	msgWriteNeedsToken = "replaying deliveries needs a console token of the project's owner or an admin (`Authorization: Bearer <token>` from the control plane, as the dashboard sends it); an API key only reads"
	msgWriteNeedsRole  = "only the project's owner and admins may replay deliveries; ask one of them, or to be made an admin"
	msgWriteReadOnly   = "this console token was minted with a read-only personal access token, which changes nothing; use a token without the read-only limit, or the dashboard"
)

// forbiddenError is the outcome of a credential that opens the project but may not do
// what was asked. Callers recognise it by its Forbidden method (so they need not import
// this package) and answer 403 with principal.Message.
type forbiddenError struct{}

func (forbiddenError) Error() string   { return "forbidden" }
func (forbiddenError) Forbidden() bool { return true }

// ErrForbidden is wrapped by AuthorizeConsoleWrite's refusals of a credential that opens
// the project but may not change it.
var ErrForbidden error = forbiddenError{}

// AuthorizeConsoleWrite authorizes a console request that changes projectID's data
// (a replay of deliveries): only a console token whose user is, per the mirror now, the
// project's owner or an admin. Everything AuthenticateConsole refuses is refused the same
// way (another project's credential is principal.ErrNotFound); a credential that would
// read but may not write (an API key, a member's or viewer's token) wraps ErrForbidden.
// The role is read from the mirror, not the token, so a demotion takes effect at once.
func (a *authenticator) AuthorizeConsoleWrite(ctx context.Context, headers map[string][]string, projectID string) (context.Context, error) {
	p, err := a.consoleWrite(headers, projectID)
	a.tel.ProjectauthRequests.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome(err)), attribute.String("surface", "console_write")))
	if err != nil {
		return ctx, err
	}
	return principal.NewContext(ctx, p), nil
}

func (a *authenticator) consoleWrite(headers map[string][]string, projectID string) (principal.Principal, error) {
	p, err := a.console(headers, projectID)
	if err != nil {
		return p, err
	}
	user, ok := strings.CutPrefix(p.KeyID, consoleUserPrefix)
	if p.Scope != principal.ScopeConsole || !ok {
		return principal.Principal{}, principal.Refuse(ErrForbidden, msgWriteNeedsToken)
	}
	if p.ReadOnly {
		return principal.Principal{}, principal.Refuse(ErrForbidden, msgWriteReadOnly)
	}
	proj, _ := a.cache.Project(projectID)
	switch proj.Roles[user] {
	case roleOwner, roleAdmin:
		return p, nil
	}
	return principal.Principal{}, principal.Refuse(ErrForbidden, msgWriteNeedsRole)
}
